//! Starting a program: find the main class, make the arguments, send `run:` or `run`.

use std::path::Path;

use tally_heap::Value;

use crate::objects::Kind;
use crate::{Vm, VmError};

impl Vm {
    pub(crate) fn run_main_inner(&mut self, args: &[String]) -> Result<Value, VmError> {
        let Some(first) = args.first() else {
            return Err(VmError::Load("no class or file given to run".into()));
        };
        let path = Path::new(first);
        let not_a_file = tally_syntax::not_a_regular_file(path);
        if let Some(kind) = not_a_file.filter(|_| first.ends_with(".som") || first.contains('/')) {
            return Err(VmError::Load(format!(
                "{first} {kind}: give a SOM source file (Name.som) or a class name"
            )));
        }
        let class = if first.ends_with(".som") || path.is_file() {
            if !path.is_file() {
                return Err(VmError::Load(format!("cannot find the file {first}")));
            }
            // The file's directory goes first on the class path, so its neighbours load.
            let dir = path
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            self.options.class_path.insert(0, dir.to_path_buf());
            self.load_class_file(path)?
        } else {
            let sym = self.rt.symbols.intern(first);
            match self.load_class(sym)? {
                Some(c) => c,
                None => {
                    let searched: Vec<String> = self
                        .options
                        .class_path
                        .iter()
                        .map(|d| d.join(format!("{first}.som")).display().to_string())
                        .collect();
                    let searched = if searched.is_empty() {
                        "the class path is empty".to_string()
                    } else {
                        format!("looked for {}", searched.join(", "))
                    };
                    let here = match not_a_file {
                        Some(kind) => format!(" ({first} in the current directory {kind})"),
                        None => String::new(),
                    };
                    return Err(VmError::Load(format!(
                        "cannot find class {first}: {searched}; the embedded library has no such class either{here}"
                    )));
                }
            }
        };
        if let Some(p) = self.profiler.as_deref_mut() {
            p.program_started = true;
        }
        // The arguments array: every command-line word after the options, the class's name
        // first (also when the program was given as a file).
        let array = self.alloc(self.rt.core.array, Kind::Array, args.len(), Value::NIL, 0)?;
        self.rt.handles.push(array);
        let class_name = self.rt.class_name(class);
        for (i, a) in args.iter().enumerate() {
            let word = if i == 0 {
                class_name.as_str()
            } else {
                a.as_str()
            };
            let s = self.new_string(word.as_bytes())?;
            self.rt.handles[0].set_slot(i, s);
        }
        let class_obj = self.rt.classes[class as usize].object;
        let instance = self.call(class_obj, "new", &[])?;
        let run_with_args = self.rt.symbols.intern("run:");
        let class_of_instance = self.rt.class_of(instance);
        let result = if self.rt.lookup(class_of_instance, run_with_args).is_some() {
            let array = self.rt.handles[0];
            self.call(instance, "run:", &[array])
        } else {
            self.call(instance, "run", &[])
        };
        self.rt.handles.clear();
        result
    }

    /// A xorshift generator for `atRandom`: deterministic per run, which keeps runs repeatable.
    pub(crate) fn next_random(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x
    }
}
