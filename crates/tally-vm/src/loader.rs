//! Bootstrapping the core classes and loading classes from the class path or the embedded
//! library: parse, create the class and its metaclass, compile the methods, bind primitives.

use std::collections::HashSet;
use std::path::Path;
use std::rc::Rc;

use num_bigint::BigInt;
use tally_heap::Value;
use tally_syntax::ast::{ClassDef, Ident, Literal, MethodBody};
use tally_syntax::Source;

use crate::bytecode::{CodeId, Op, SiteId};
use crate::compiler::{compile_method, ClassContext, CodeKind, CompileEnv, CompiledCode};
use crate::objects::{CoreClasses, Kind, CORE_CLASS_NAMES};
use crate::primitives;
use crate::runtime::{ClassId, ClassInfo, Code, IntOp, Site, Symbol, NO_CLASS};
use crate::{stdlib, Vm, VmError};

/// The name of the hidden field every class object has first: its class id.
const CLASS_ID_FIELD: &str = "<class id>";

impl Vm {
    pub(crate) fn bootstrap(&mut self) -> Result<(), VmError> {
        // Reserve ids for the core classes and their metaclasses, so the VM knows them
        // before any source is read.
        let mut ids = [0u32; 19];
        for (i, name) in CORE_CLASS_NAMES.iter().enumerate() {
            let sym = self.rt.symbols.intern(name);
            ids[i] = self.reserve_class(sym);
        }
        self.rt.core = CoreClasses::from_ids(&ids);
        for (i, name) in CORE_CLASS_NAMES.iter().enumerate() {
            let sym = self.rt.symbols.intern(name);
            let (def, source) = self.read_class(sym)?.ok_or_else(|| {
                VmError::Load(format!(
                    "cannot find the core class {name}: not on the class path and not embedded"
                ))
            })?;
            self.define_class(&def, source, Some(ids[i]))?;
        }
        let core = self.rt.core;
        let kinds = [
            (core.array, Kind::Array),
            (core.string, Kind::String),
            (core.double, Kind::Double),
            (core.block, Kind::Block),
            (core.method, Kind::Method),
            (core.primitive, Kind::Method),
            (core.class, Kind::Class),
        ];
        for (c, k) in kinds {
            self.rt.classes[c as usize].instance_kind = k;
        }
        let special = [
            core.integer,
            core.double,
            core.symbol,
            core.block,
            core.method,
            core.primitive,
            core.class,
            core.boolean,
            core.nil,
        ];
        for c in special {
            self.rt.classes[c as usize].special_layout = true;
        }
        // The core classes were defined before their kinds were known; give their subclasses
        // (Block1, Metaclass, True, …) what they inherit. Later classes inherit at definition.
        for c in 0..self.rt.classes.len() {
            if self.rt.classes[c].is_meta {
                continue;
            }
            let mut s = self.rt.classes[c].superclass;
            while let Some(k) = s {
                let (kind, sp) = (
                    self.rt.classes[k as usize].instance_kind,
                    self.rt.classes[k as usize].special_layout,
                );
                if sp || kind != Kind::Plain {
                    let info = &mut self.rt.classes[c];
                    info.special_layout |= sp;
                    if info.instance_kind == Kind::Plain {
                        info.instance_kind = kind;
                    }
                    break;
                }
                s = self.rt.classes[k as usize].superclass;
            }
        }
        self.rt.block_classes = vec![core.block1, core.block2, core.block3];
        let block4 = self.rt.symbols.intern("Block4");
        if let Some(c) = self.load_class(block4)? {
            self.rt.block_classes.push(c);
        }
        for name in ["nil", "true", "false"] {
            let sym = self.rt.symbols.intern(name);
            let v = match name {
                "nil" => Value::NIL,
                "true" => Value::TRUE,
                _ => Value::FALSE,
            };
            self.rt.set_global(sym, v);
        }
        let system = self.alloc(
            core.system,
            Kind::Plain,
            self.rt.classes[core.system as usize].fields.len(),
            Value::NIL,
            0,
        )?;
        let sym = self.rt.symbols.intern("system");
        self.rt.set_global(sym, system);
        Ok(())
    }

    /// Adds an empty class and its metaclass to the class table; returns the class's id.
    fn reserve_class(&mut self, name: Symbol) -> ClassId {
        let id = self.rt.classes.len() as ClassId;
        for is_meta in [false, true] {
            self.rt.classes.push(ClassInfo {
                name,
                superclass: None,
                partner: if is_meta { id } else { id + 1 },
                is_meta,
                object: Value::NIL,
                fields: Vec::new(),
                own_fields: 0,
                methods: Default::default(),
                method_order: Vec::new(),
                instance_kind: if is_meta { Kind::Class } else { Kind::Plain },
                special_layout: is_meta,
                methods_array: Value::NIL,
            });
        }
        id
    }

    /// Finds a class's source: the class path first (so a library given with `-cp` replaces
    /// ours), then the embedded library.
    fn read_class(&mut self, name: Symbol) -> Result<Option<(ClassDef, u32)>, VmError> {
        let Some(source) = find_class_source(&self.options.class_path, self.rt.symbols.name(name))?
        else {
            return Ok(None);
        };
        self.parse_source(source).map(Some)
    }

    /// The source text class `name` would be loaded from with class path `dirs` (then the
    /// embedded library), without loading it.
    pub(crate) fn class_source_text(
        &self,
        dirs: &[std::path::PathBuf],
        name: &str,
    ) -> Result<Option<String>, VmError> {
        Ok(find_class_source(dirs, name)?.map(|s| s.text().to_string()))
    }

    fn parse_source(&mut self, source: Source) -> Result<(ClassDef, u32), VmError> {
        let def =
            tally_syntax::parse_class(&source).map_err(|e| VmError::Load(e.render(&source)))?;
        let index = self.rt.sources.len() as u32;
        self.rt.sources.push(Rc::new(source));
        Ok((def, index))
    }

    /// Loads the class `name` unless it is already a global; `None` when no source defines it.
    pub(crate) fn load_class(&mut self, name: Symbol) -> Result<Option<ClassId>, VmError> {
        if let Some(v) = self.rt.global(name) {
            if v.is_ref() && Kind::from_u8(v.kind()) == Kind::Class {
                return Ok(Some(v.slot(0).int_unchecked() as ClassId));
            }
        }
        // Samples taken while a class is read, parsed and compiled count as compiling, not
        // as time in the method whose send needed the class.
        let previous = self.profile_state(tally_profile::VmState::Compiling);
        let result = self.load_class_from_path(name);
        if let Some(previous) = previous {
            self.profile_state(previous);
        }
        match result {
            // A class the running program needed: its error carries the SOM stack that
            // needed it, like any runtime error.
            Err(VmError::Load(message)) => {
                let trace = self.stack_trace();
                if trace.is_empty() {
                    Err(VmError::Load(message))
                } else {
                    Err(VmError::Runtime { message, trace })
                }
            }
            other => other,
        }
    }

    fn load_class_from_path(&mut self, name: Symbol) -> Result<Option<ClassId>, VmError> {
        let Some((def, source)) = self.read_class(name)? else {
            return Ok(None);
        };
        if def.name.name != self.rt.symbols.name(name) {
            let s = &self.rt.sources[source as usize];
            let (line, col) = s.line_col(def.name.span.start);
            return Err(VmError::Load(format!(
                "{}:{line}:{col}: error: the file defines class '{}', but '{}' was expected from its name",
                s.path(),
                def.name.name,
                self.rt.symbols.name(name)
            )));
        }
        self.define_class(&def, source, None).map(Some)
    }

    /// Loads a class from an explicit `.som` file (the program given on the command line).
    pub(crate) fn load_class_file(&mut self, path: &Path) -> Result<ClassId, VmError> {
        let source = Source::read(path).map_err(|e| VmError::Load(e.to_string()))?;
        let (def, index) = self.parse_source(source)?;
        self.define_class(&def, index, None)
    }

    fn field_names(
        &self,
        list: &[Ident],
        inherited: &[String],
        source: u32,
    ) -> Result<Vec<String>, VmError> {
        let mut fields = inherited.to_vec();
        let mut seen: HashSet<&str> = HashSet::new();
        for f in list {
            if inherited.contains(&f.name) {
                return Err(self.compile_error(
                    source,
                    f.span.start,
                    &format!("Field '{}' is already defined in a superclass.", f.name),
                ));
            }
            if !seen.insert(&f.name) {
                return Err(self.compile_error(
                    source,
                    f.span.start,
                    &format!("Field '{}' has already been defined in this class", f.name),
                ));
            }
            fields.push(f.name.clone());
        }
        Ok(fields)
    }

    fn compile_error(&self, source: u32, offset: u32, message: &str) -> VmError {
        let s = &self.rt.sources[source as usize];
        let err = tally_syntax::SyntaxError::new(
            message,
            tally_syntax::ast::Span {
                start: offset,
                end: offset + 1,
            },
        );
        VmError::Load(err.render(s))
    }

    /// Creates (or fills the reserved slot of) a class from its definition.
    fn define_class(
        &mut self,
        def: &ClassDef,
        source: u32,
        reserved: Option<ClassId>,
    ) -> Result<ClassId, VmError> {
        let first_code = self.rt.codes.len();
        let name = self.rt.symbols.intern(&def.name.name);
        let superclass = match &def.superclass {
            Some(s) if s.name == "nil" => None,
            None if def.name.name == "Object" => None,
            None => Some(self.rt.core.object),
            Some(s) => {
                let sym = self.rt.symbols.intern(&s.name);
                let chain: Vec<Symbol> = self.rt.loading.iter().copied().chain([name]).collect();
                if let Some(at) = chain.iter().position(|c| *c == sym) {
                    let mut cycle: Vec<&str> = chain[at..]
                        .iter()
                        .map(|c| self.rt.symbols.name(*c))
                        .collect();
                    cycle.push(&s.name);
                    let cycle = cycle.join(" -> ");
                    let err = self.compile_error(
                        source,
                        s.span.start,
                        &format!("superclass cycle: {cycle} (a class cannot inherit from itself)"),
                    );
                    self.rt.loading.clear();
                    return Err(err);
                }
                self.rt.loading.push(name);
                let loaded = self.load_class(sym);
                self.rt.loading.pop();
                match loaded? {
                    Some(c) => Some(c),
                    None => {
                        return Err(self.compile_error(
                            source,
                            s.span.start,
                            &format!(
                                "superclass '{}' of '{}' not found on the class path",
                                s.name, def.name.name
                            ),
                        ))
                    }
                }
            }
        };
        let id = match reserved {
            Some(id) => id,
            None => self.reserve_class(name),
        };
        let meta = id + 1;
        let core = self.rt.core;
        let (inherited, super_meta, kind) = match superclass {
            Some(s) => {
                let si = &self.rt.classes[s as usize];
                (
                    si.fields.clone(),
                    Some(si.partner),
                    (si.instance_kind, si.special_layout),
                )
            }
            None => (Vec::new(), Some(core.class), (Kind::Plain, false)),
        };
        let mut fields = self.field_names(&def.instance_fields, &inherited, source)?;
        if id == core.class {
            fields.insert(0, CLASS_ID_FIELD.to_string());
        }
        let meta_inherited = match super_meta {
            Some(m) if m == core.class && id == core.object => vec![CLASS_ID_FIELD.to_string()],
            Some(m) => {
                let f = &self.rt.classes[m as usize].fields;
                if f.is_empty() {
                    vec![CLASS_ID_FIELD.to_string()]
                } else {
                    f.clone()
                }
            }
            None => vec![CLASS_ID_FIELD.to_string()],
        };
        let meta_fields = self.field_names(&def.class_fields, &meta_inherited, source)?;
        {
            let info = &mut self.rt.classes[id as usize];
            info.name = name;
            info.superclass = superclass;
            info.own_fields = def.instance_fields.len();
            info.fields = fields;
            if reserved.is_none() {
                (info.instance_kind, info.special_layout) = kind;
            }
            info.methods.clear();
            info.method_order.clear();
            info.methods_array = Value::NIL;
        }
        {
            let minfo = &mut self.rt.classes[meta as usize];
            minfo.name = name;
            minfo.superclass = super_meta;
            minfo.own_fields = def.class_fields.len();
            minfo.fields = meta_fields;
            minfo.methods.clear();
            minfo.method_order.clear();
            minfo.methods_array = Value::NIL;
        }
        // The heap objects: the class (an instance of its metaclass) and the metaclass (an
        // instance of Metaclass).
        let meta_slots = self.rt.classes[meta as usize].fields.len();
        let obj = self.alloc(meta, Kind::Class, meta_slots, Value::NIL, 0)?;
        obj.set_slot(0, Value::from_small_int(id as i64));
        self.rt.classes[id as usize].object = obj;
        let metaclass_slots = self.rt.classes[core.metaclass as usize].fields.len().max(1);
        let mobj = self.alloc(core.metaclass, Kind::Class, metaclass_slots, Value::NIL, 0)?;
        mobj.set_slot(0, Value::from_small_int(meta as i64));
        self.rt.classes[meta as usize].object = mobj;
        let obj = self.rt.classes[id as usize].object;
        self.rt.set_global(name, obj);

        for (side, methods) in [(id, &def.instance_methods), (meta, &def.class_methods)] {
            for m in methods {
                let code_id = self.compile(side, m, source)?;
                let sel = self.rt.symbols.intern(&m.selector);
                let info = &mut self.rt.classes[side as usize];
                if info.methods.insert(sel, code_id).is_none() {
                    info.method_order.push(sel);
                }
                self.rt.nil_tests.observe(
                    &self.rt.symbols,
                    &self.rt.core,
                    side,
                    sel,
                    self.rt.codes[code_id as usize].trivial,
                );
            }
        }
        self.rt.lookup_cache.clear();
        for site in self.rt.sites.iter_mut() {
            site.cached_class = NO_CLASS;
            site.cached_class2 = NO_CLASS;
            site.seen = None;
        }
        self.profile_event(tally_profile::EventKind::ClassLoaded {
            class: tally_profile::ClassId(id),
            name: def.name.name.clone(),
            source: self.rt.sources[source as usize].path().to_string(),
        });
        self.profile_announce_code(first_code);
        self.resolve_method_hooks(first_code);
        self.instrument_announce();
        Ok(id)
    }

    fn compile(
        &mut self,
        holder: ClassId,
        m: &tally_syntax::ast::MethodDef,
        source: u32,
    ) -> Result<CodeId, VmError> {
        let selector = self.rt.symbols.intern(&m.selector);
        match &m.body {
            MethodBody::Primitive => {
                let info = &self.rt.classes[holder as usize];
                let base = self.rt.symbols.name(info.name).to_string();
                let prim = primitives::find(&base, info.is_meta, &m.selector);
                let line = self.rt.sources[source as usize].line_col(m.span.start).0;
                let code = Code {
                    id: self.rt.codes.len() as CodeId,
                    trivial: crate::runtime::Trivial::No,
                    kind: CodeKind::Method,
                    selector,
                    holder,
                    ops: Vec::new(),
                    positions: Vec::new(),
                    num_args: m.params.len() as u16,
                    num_locals: 0,
                    context_size: 0,
                    captured_args: Vec::new(),
                    primitive: prim,
                    source,
                    source_line: line,
                    plain_frame: false,
                    max_height: 0,
                    compiled: Default::default(),
                    direct: Default::default(),
                    loop_entries: Default::default(),
                    intrinsic: Default::default(),
                    calls: Default::default(),
                    trivial_kind: crate::runtime::TRIVIAL_NONE,
                    trivial_operand: 0,
                    hooks: Default::default(),
                    room_above_arguments: crate::value_stack::HEADROOM as u32,
                };
                Ok(self.rt.add_code(code))
            }
            MethodBody::Code(body) => {
                let info = &self.rt.classes[holder as usize];
                let fields = info.fields.clone();
                let super_class = info.superclass;
                let class = ClassContext {
                    fields: &fields,
                    super_class,
                    holder,
                };
                let src = self.rt.sources[source as usize].clone();
                let mut env = Env { vm: self };
                compile_method(&mut env, &class, m, body, source, &src)
                    .map_err(|e| self.compile_error(source, e.span.start, &e.message))
            }
        }
    }

    /// Allocates a literal and records it in the literal table (a GC root).
    fn materialize(&mut self, lit: &Literal) -> Result<Value, VmError> {
        Ok(match lit {
            Literal::Integer(i) => match Value::from_int(*i) {
                Some(v) => v,
                None => self.new_bigint(&BigInt::from(*i))?,
            },
            Literal::BigInteger(b) => self.new_bigint(b)?,
            Literal::Double(d) => self.new_double(*d)?,
            Literal::String(s) => self.new_string(s.as_bytes())?,
            Literal::Symbol(s) => Value::from_symbol(self.rt.symbols.intern(s)),
            Literal::Array(items) => {
                let arr =
                    self.alloc(self.rt.core.array, Kind::Array, items.len(), Value::NIL, 0)?;
                self.rt.handles.push(arr);
                for (i, item) in items.iter().enumerate() {
                    let v = self.materialize(item);
                    let v = match v {
                        Ok(v) => v,
                        Err(e) => {
                            self.rt.handles.pop();
                            return Err(e);
                        }
                    };
                    let arr = *self.rt.handles.last().expect("handle");
                    arr.set_slot(i, v);
                }
                self.rt.handles.pop().expect("handle")
            }
        })
    }
}

/// The compiler's view of the VM.
struct Env<'v> {
    vm: &'v mut Vm,
}

impl CompileEnv for Env<'_> {
    fn intern(&mut self, name: &str) -> u32 {
        self.vm.rt.symbols.intern(name)
    }

    fn add_site(&mut self, selector: u32, argc: u8, super_lookup: Option<u32>) -> SiteId {
        let int_op = if argc == 1 && super_lookup.is_none() {
            IntOp::for_selector(self.vm.rt.symbols.name(selector))
        } else {
            IntOp::None
        };
        self.vm.rt.add_site(Site {
            selector,
            int_op,
            argc,
            super_lookup,
            cached_class: NO_CLASS,
            cached_code: 0,
            cached_class2: NO_CLASS,
            cached_code2: 0,
            operands: Default::default(),
            stub_sends: 0,
            seen: None,
        })
    }

    fn add_literal(&mut self, literal: &Literal) -> Result<u32, String> {
        let v = self.vm.materialize(literal).map_err(|e| e.to_string())?;
        Ok(self.vm.rt.add_literal(v))
    }

    fn global_slot(&mut self, name: u32) -> u32 {
        self.vm.rt.global_slot(name)
    }

    fn add_code(&mut self, mut code: CompiledCode) -> CodeId {
        // Sends whose selector has an integer fast path get the instruction that tries it.
        for op in code.ops.iter_mut() {
            if let Op::Send(site) = *op {
                let s = &self.vm.rt.sites[site as usize];
                if s.int_op != IntOp::None {
                    *op = Op::SendBinary(site);
                } else if s.argc == 0 && s.super_lookup.is_none() {
                    match self.vm.rt.symbols.name(s.selector) {
                        "isNil" => *op = Op::SendIsNil(site),
                        "notNil" => *op = Op::SendNotNil(site),
                        _ => {}
                    }
                }
            }
        }
        let sites = &self.vm.rt.sites;
        crate::peephole::compare_and_branch(&mut code.ops, |site| {
            sites[site as usize].int_op.is_comparison()
        });
        crate::peephole::superinstructions(&mut code.ops, &mut code.positions);
        let start = 1 + code.num_args as usize + code.num_locals as usize;
        let (_, max_height) = crate::bytecode::stack_heights(&code.ops, start, |site| {
            sites[site as usize].argc as usize
        })
        .unwrap_or_else(|e| panic!("the bytecode compiler emitted unbalanced code: {e}"));
        // `^0.0`, `^1000.0`: a literal that is an immediate (never moved by the collector)
        // answered as a constant, so the method is trivial for compiled code too.
        if let [Op::PushLiteral(i), Op::Return] = code.ops[..] {
            let v = self.vm.rt.literals[i as usize];
            if !v.is_ref() {
                code.ops[0] = Op::PushConst(v);
            }
        }
        let id = self.vm.rt.codes.len() as CodeId;
        self.vm
            .rt
            .add_code(Code::from_compiled(id, code, max_height));
        self.vm.code_added(id as usize);
        id
    }
}

/// Finds class `name`'s source: `name.som` in the first directory of `dirs` that has it, else
/// the embedded library's.
fn find_class_source(dirs: &[std::path::PathBuf], name: &str) -> Result<Option<Source>, VmError> {
    let file = format!("{name}.som");
    for dir in dirs {
        let path = dir.join(&file);
        if let Some(kind) = tally_syntax::not_a_regular_file(&path) {
            return Err(VmError::Load(format!(
                "{} {kind}, not a source file (found on the class path looking for class {name})",
                path.display(),
            )));
        }
        if path.is_file() {
            return Source::read(&path)
                .map(Some)
                .map_err(|e| VmError::Load(e.to_string()));
        }
    }
    Ok(stdlib::embedded(name).map(|text| Source::new(format!("<tally>/{file}"), text.to_string())))
}
