//! What to run: benchmarks, the class path they need, and how big each run is.
//!
//! Two sources describe a suite. A *directory* in the Are We Fast Yet layout
//! is taken as it is, so an AWFY checkout needs no file of ours: every class
//! declared `Name = Benchmark (` is a benchmark and the directory with its
//! sub-directories is the class path. A *suite file* (TOML) is for suites we
//! keep in the repository, where the sizes are part of what is versioned.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::BenchError;

/// One benchmark as it will be run: `harness name iterations inner`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Benchmark {
    /// Class name, passed to the harness.
    pub name: String,
    /// Iterations per invocation (the harness's "outer" count); each is timed.
    pub iterations: u32,
    /// Work per iteration (the harness's "inner" count, a problem size for some).
    pub inner: u64,
}

/// A resolved suite: everything an executor needs to build a command line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Suite {
    /// Shown in reports; the file stem or directory name unless the file says.
    pub name: String,
    /// The suite file or directory it came from, as given.
    pub source: String,
    /// The harness class the VM is asked to run.
    pub harness: String,
    /// Class-path directories, in lookup order.
    pub classpath: Vec<PathBuf>,
    /// Benchmarks in run order.
    pub benchmarks: Vec<Benchmark>,
}

/// Command-line adjustments of a suite; `None` keeps what the suite says.
#[derive(Debug, Clone, Default)]
pub struct SuiteOptions {
    /// Iterations per invocation for every benchmark.
    pub iterations: Option<u32>,
    /// Inner count for every benchmark not named in `inner_for`.
    pub inner: Option<u64>,
    /// Inner count for named benchmarks.
    pub inner_for: BTreeMap<String, u64>,
    /// Run only these benchmarks (in suite order); empty means all.
    pub only: Vec<String>,
    /// Directories appended to the class path (e.g. a VM's core library).
    pub extra_classpath: Vec<PathBuf>,
    /// Harness class, overriding the suite's.
    pub harness: Option<String>,
}

/// The suite-file format. Unknown keys are errors so that a typo does not
/// silently run a different experiment from the one the file seems to describe.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SuiteFile {
    name: Option<String>,
    #[serde(default = "default_harness")]
    harness: String,
    #[serde(default)]
    classpath: Vec<String>,
    iterations: Option<u32>,
    inner: Option<u64>,
    #[serde(default, rename = "benchmark")]
    benchmarks: Vec<BenchmarkEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BenchmarkEntry {
    name: String,
    iterations: Option<u32>,
    inner: Option<u64>,
}

fn default_harness() -> String {
    "Harness".to_string()
}

const DEFAULT_ITERATIONS: u32 = 1;
const DEFAULT_INNER: u64 = 1;

impl Suite {
    /// Reads a suite from a TOML file or an AWFY-style directory and applies
    /// the command-line options; checks that the class path and the harness exist,
    /// so a typo fails before any VM is started.
    pub fn load(path: &Path, options: &SuiteOptions) -> Result<Suite, BenchError> {
        let mut suite = if path.is_dir() {
            Self::from_directory(path)?
        } else if path.is_file() {
            Self::from_file(path)?
        } else {
            return Err(BenchError::Suite(format!(
                "{}: no such suite file or directory",
                path.display()
            )));
        };
        suite.apply(options)?;
        suite.check()?;
        Ok(suite)
    }

    fn from_file(path: &Path) -> Result<Suite, BenchError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| BenchError::Suite(format!("{}: {e}", path.display())))?;
        let file: SuiteFile = toml::from_str(&text)
            .map_err(|e| BenchError::Suite(format!("{}: {e}", path.display())))?;
        let base = path.parent().unwrap_or(Path::new("."));
        let classpath = file
            .classpath
            .iter()
            .map(|entry| Ok(base.join(expand_variables(entry, path)?)))
            .collect::<Result<Vec<_>, BenchError>>()?;
        if file.benchmarks.is_empty() {
            return Err(BenchError::Suite(format!(
                "{}: the suite lists no [[benchmark]]",
                path.display()
            )));
        }
        let benchmarks = file
            .benchmarks
            .into_iter()
            .map(|b| Benchmark {
                name: b.name,
                iterations: b
                    .iterations
                    .or(file.iterations)
                    .unwrap_or(DEFAULT_ITERATIONS),
                inner: b.inner.or(file.inner).unwrap_or(DEFAULT_INNER),
            })
            .collect();
        Ok(Suite {
            name: file.name.unwrap_or_else(|| stem(path)),
            source: path.display().to_string(),
            harness: file.harness,
            classpath,
            benchmarks,
        })
    }

    fn from_directory(dir: &Path) -> Result<Suite, BenchError> {
        let mut classpath = vec![dir.to_path_buf()];
        let mut subdirs: Vec<PathBuf> = read_dir_sorted(dir)?
            .into_iter()
            .filter(|p| p.is_dir() && contains_som_files(p))
            .collect();
        subdirs.sort();
        classpath.extend(subdirs);
        let mut benchmarks = Vec::new();
        for d in &classpath {
            for file in read_dir_sorted(d)? {
                if file.extension().and_then(|e| e.to_str()) != Some("som") {
                    continue;
                }
                let name = stem(&file);
                let Ok(text) = std::fs::read_to_string(&file) else {
                    continue;
                };
                if declares_benchmark_subclass(&text, &name) {
                    benchmarks.push(Benchmark {
                        name,
                        iterations: DEFAULT_ITERATIONS,
                        inner: DEFAULT_INNER,
                    });
                }
            }
        }
        benchmarks.sort_by(|a, b| a.name.cmp(&b.name));
        if benchmarks.is_empty() {
            return Err(BenchError::Suite(format!(
                "{}: no benchmark classes (`Name = Benchmark (`) in the directory or its sub-directories",
                dir.display()
            )));
        }
        Ok(Suite {
            name: stem(dir),
            source: dir.display().to_string(),
            harness: default_harness(),
            classpath,
            benchmarks,
        })
    }

    fn apply(&mut self, o: &SuiteOptions) -> Result<(), BenchError> {
        if let Some(h) = &o.harness {
            self.harness = h.clone();
        }
        self.classpath.extend(o.extra_classpath.iter().cloned());
        for name in o.only.iter().chain(o.inner_for.keys()) {
            if !self.benchmarks.iter().any(|b| &b.name == name) {
                let known: Vec<&str> = self.benchmarks.iter().map(|b| b.name.as_str()).collect();
                return Err(BenchError::Suite(format!(
                    "no benchmark {name} in suite {} (it has: {})",
                    self.name,
                    known.join(", ")
                )));
            }
        }
        if !o.only.is_empty() {
            self.benchmarks.retain(|b| o.only.contains(&b.name));
        }
        for b in &mut self.benchmarks {
            if let Some(n) = o.iterations {
                b.iterations = n;
            }
            if let Some(&n) = o.inner_for.get(&b.name) {
                b.inner = n;
            } else if let Some(n) = o.inner {
                b.inner = n;
            }
        }
        Ok(())
    }

    fn check(&self) -> Result<(), BenchError> {
        for d in &self.classpath {
            if !d.is_dir() {
                return Err(BenchError::Suite(format!(
                    "class-path directory {} does not exist",
                    d.display()
                )));
            }
        }
        let harness_file = format!("{}.som", self.harness);
        if !self
            .classpath
            .iter()
            .any(|d| d.join(&harness_file).is_file())
        {
            return Err(BenchError::Suite(format!(
                "harness {harness_file} is not on the class path ({})",
                self.classpath_string()
            )));
        }
        if self
            .benchmarks
            .iter()
            .any(|b| b.iterations == 0 || b.inner == 0)
        {
            return Err(BenchError::Suite(
                "iterations and inner counts must be at least 1".into(),
            ));
        }
        Ok(())
    }

    /// The class path joined with ':' as SOM VMs take it.
    pub fn classpath_string(&self) -> String {
        self.classpath
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(":")
    }
}

fn stem(path: &Path) -> String {
    path.file_stem()
        .or_else(|| path.file_name())
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "suite".into())
}

fn read_dir_sorted(dir: &Path) -> Result<Vec<PathBuf>, BenchError> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| BenchError::Suite(format!("{}: {e}", dir.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    Ok(entries)
}

fn contains_som_files(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .map(|it| {
            it.filter_map(|e| e.ok())
                .any(|e| e.path().extension().is_some_and(|x| x == "som"))
        })
        .unwrap_or(false)
}

/// Whether a source file defines class `name` as a direct subclass of
/// `Benchmark`: the AWFY convention that tells benchmarks from helpers.
fn declares_benchmark_subclass(text: &str, name: &str) -> bool {
    let text = strip_comments(text);
    let mut rest = text.trim_start();
    let Some(after) = rest.strip_prefix(name) else {
        return false;
    };
    rest = after.trim_start();
    let Some(after) = rest.strip_prefix('=') else {
        return false;
    };
    rest = after.trim_start();
    let Some(after) = rest.strip_prefix("Benchmark") else {
        return false;
    };
    after.trim_start().starts_with('(')
}

fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_comment = false;
    let mut in_string = false;
    for c in text.chars() {
        match c {
            '"' if !in_string => in_comment = !in_comment,
            '\'' if !in_comment => {
                in_string = !in_string;
                out.push(c);
            }
            _ if !in_comment => out.push(c),
            _ => {}
        }
    }
    out
}

/// `${NAME}` in a suite file's class path comes from the environment, so a
/// suite can refer to a checkout (AWFY, a VM's core library) without the
/// repository recording where it lives on one machine.
fn expand_variables(entry: &str, file: &Path) -> Result<String, BenchError> {
    let mut out = String::new();
    let mut rest = entry;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find('}').ok_or_else(|| {
            BenchError::Suite(format!(
                "{}: unclosed ${{ in class-path entry {entry:?}",
                file.display()
            ))
        })?;
        let var = &after[..end];
        let value = std::env::var(var).map_err(|_| {
            BenchError::Suite(format!(
                "{}: class-path entry {entry:?} needs the environment variable {var}",
                file.display()
            ))
        })?;
        out.push_str(&value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_benchmark_classes_only() {
        assert!(declares_benchmark_subclass(
            "\"c\" Bounce = Benchmark (\n)",
            "Bounce"
        ));
        assert!(declares_benchmark_subclass("CD = Benchmark(", "CD"));
        assert!(!declares_benchmark_subclass("Ball = Object (", "Ball"));
        assert!(!declares_benchmark_subclass("Benchmark = (", "Benchmark"));
        assert!(!declares_benchmark_subclass(
            "\"Bounce = Benchmark (\" Other = (",
            "Bounce"
        ));
    }

    #[test]
    fn suite_file_defaults_and_overrides() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("lib")).unwrap();
        std::fs::write(d.path().join("lib/Harness.som"), "Harness = ()").unwrap();
        let file = d.path().join("s.toml");
        std::fs::write(
            &file,
            "classpath = [\"lib\"]\niterations = 4\n[[benchmark]]\nname = \"A\"\ninner = 7\n[[benchmark]]\nname = \"B\"\niterations = 2\n",
        )
        .unwrap();
        let s = Suite::load(&file, &SuiteOptions::default()).unwrap();
        assert_eq!(s.name, "s");
        assert_eq!(s.harness, "Harness");
        assert_eq!(s.classpath, vec![d.path().join("lib")]);
        assert_eq!(
            s.benchmarks,
            vec![
                Benchmark {
                    name: "A".into(),
                    iterations: 4,
                    inner: 7
                },
                Benchmark {
                    name: "B".into(),
                    iterations: 2,
                    inner: 1
                },
            ]
        );
        let mut o = SuiteOptions {
            iterations: Some(9),
            inner: Some(3),
            only: vec!["B".into()],
            ..Default::default()
        };
        o.inner_for.insert("B".into(), 11);
        let s = Suite::load(&file, &o).unwrap();
        assert_eq!(
            s.benchmarks,
            vec![Benchmark {
                name: "B".into(),
                iterations: 9,
                inner: 11
            }]
        );
        o.only = vec!["C".into()];
        let e = Suite::load(&file, &o).unwrap_err().to_string();
        assert!(e.contains("no benchmark C") && e.contains("A, B"), "{e}");
    }

    #[test]
    fn suite_file_errors_are_specific() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("s.toml");
        std::fs::write(&file, "clas_path = []\n").unwrap();
        let e = Suite::load(&file, &SuiteOptions::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("clas_path"), "{e}");
        std::fs::write(
            &file,
            "classpath = [\"${TALLY_BENCH_SURELY_UNSET}\"]\n[[benchmark]]\nname = \"A\"\n",
        )
        .unwrap();
        let e = Suite::load(&file, &SuiteOptions::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("TALLY_BENCH_SURELY_UNSET"), "{e}");
        std::fs::write(&file, "classpath = [\".\"]\n[[benchmark]]\nname = \"A\"\n").unwrap();
        let e = Suite::load(&file, &SuiteOptions::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("Harness.som is not on the class path"), "{e}");
    }

    #[test]
    fn directory_suite_finds_benchmarks_in_subdirectories() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path();
        std::fs::create_dir(p.join("Sub")).unwrap();
        std::fs::write(p.join("Harness.som"), "Harness = ()").unwrap();
        std::fs::write(p.join("Benchmark.som"), "Benchmark = ()").unwrap();
        std::fs::write(p.join("Zed.som"), "Zed = Benchmark ()").unwrap();
        std::fs::write(p.join("Helper.som"), "Helper = ()").unwrap();
        std::fs::write(p.join("Sub/Alpha.som"), "Alpha = Benchmark ()").unwrap();
        let s = Suite::load(p, &SuiteOptions::default()).unwrap();
        let names: Vec<&str> = s.benchmarks.iter().map(|b| b.name.as_str()).collect();
        assert_eq!(names, ["Alpha", "Zed"]);
        assert_eq!(s.classpath, vec![p.to_path_buf(), p.join("Sub")]);
    }
}
