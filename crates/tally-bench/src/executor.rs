//! Who runs a benchmark: a Tally configuration or any other VM's command.
//!
//! Both become an argument vector per benchmark; the runner does not care
//! which. Tally is special only in that its command line is known, so a
//! configuration is just its flags, and the binary defaults to the `tally`
//! that is running (comparing a build against itself needs no paths).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::BenchError;
use crate::suite::{Benchmark, Suite};

/// How an executor builds its command line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum ExecutorKind {
    /// `tally FLAGS -cp CLASSPATH HARNESS BENCH ITERATIONS INNER`.
    Tally {
        /// The tally binary.
        program: PathBuf,
        /// Extra tally flags: the configuration under test.
        flags: Vec<String>,
    },
    /// A command template with `{placeholders}` (see [`PLACEHOLDERS`]).
    Command {
        /// What `{vm}` stands for, if the template uses it.
        vm: Option<PathBuf>,
        /// The template, split into words.
        template: Vec<String>,
    },
}

/// One alternative being compared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Executor {
    /// Short name used in tables, plots and files.
    pub name: String,
    /// How its command line is built.
    #[serde(flatten)]
    pub kind: ExecutorKind,
}

/// The placeholders a command template may use, with what they become.
pub const PLACEHOLDERS: &str = "\
{vm}             the path given as NAME@PATH
{classpath}      the class path joined with ':' (one word)
{classpath_args} the class-path directories as separate words (must stand alone)
{harness}        the harness class (usually Harness)
{bench}          the benchmark class
{iterations}     iterations per invocation (alias {outer})
{inner}          inner iterations";

impl Executor {
    /// Parses `NAME[@PATH][=FLAGS]`: a Tally configuration; `PATH` is the
    /// tally binary (default: `default_program`), `FLAGS` its extra options.
    pub fn parse_tally(spec: &str, default_program: &Path) -> Result<Executor, BenchError> {
        let (head, flags) = match spec.split_once('=') {
            Some((h, f)) => (h, split_words(f).map_err(|m| exec_error(h, m))?),
            None => (spec, Vec::new()),
        };
        let (name, program) = split_name(head)?;
        Ok(Executor {
            name,
            kind: ExecutorKind::Tally {
                program: program.unwrap_or_else(|| default_program.to_path_buf()),
                flags,
            },
        })
    }

    /// Parses `NAME[@VM]=TEMPLATE`: an external command.
    pub fn parse_command(spec: &str) -> Result<Executor, BenchError> {
        let Some((head, template)) = spec.split_once('=') else {
            return Err(BenchError::Usage(format!(
                "--command {spec:?}: expected NAME=TEMPLATE, e.g. 'som-rs@/path/som-interpreter-bc={{vm}} -c {{classpath_args}} -- {{harness}} {{bench}} {{iterations}} {{inner}}'"
            )));
        };
        let (name, vm) = split_name(head)?;
        let template = split_words(template).map_err(|m| exec_error(&name, m))?;
        if template.is_empty() {
            return Err(exec_error(&name, "empty command template".into()));
        }
        let executor = Executor {
            name,
            kind: ExecutorKind::Command { vm, template },
        };
        executor.check_template()?;
        Ok(executor)
    }

    fn check_template(&self) -> Result<(), BenchError> {
        let ExecutorKind::Command { vm, template } = &self.kind else {
            return Ok(());
        };
        for word in template {
            let mut rest = word.as_str();
            while let Some(open) = rest.find('{') {
                let after = &rest[open + 1..];
                let close = after
                    .find('}')
                    .ok_or_else(|| exec_error(&self.name, format!("unclosed '{{' in {word:?}")))?;
                let key = &after[..close];
                match key {
                    "vm" if vm.is_none() => return Err(exec_error(
                        &self.name,
                        "the template uses {vm} but no path was given (write NAME@PATH=TEMPLATE)"
                            .into(),
                    )),
                    "classpath_args" if word != "{classpath_args}" => {
                        return Err(exec_error(
                            &self.name,
                            "{classpath_args} must be a word of its own".into(),
                        ))
                    }
                    "vm" | "classpath" | "classpath_args" | "harness" | "bench" | "iterations"
                    | "outer" | "inner" => {}
                    other => {
                        return Err(exec_error(
                            &self.name,
                            format!("unknown placeholder {{{other}}}; known:\n{PLACEHOLDERS}"),
                        ))
                    }
                }
                rest = &after[close + 1..];
            }
        }
        Ok(())
    }

    /// The command line that runs `bench` from `suite`.
    pub fn argv(&self, suite: &Suite, bench: &Benchmark) -> Vec<String> {
        match &self.kind {
            ExecutorKind::Tally { program, flags } => {
                let mut argv = vec![program.display().to_string()];
                // A flag may name a file per benchmark (a profile recorded for it).
                argv.extend(flags.iter().map(|f| f.replace("{bench}", &bench.name)));
                argv.push("-cp".into());
                argv.push(suite.classpath_string());
                argv.push(suite.harness.clone());
                argv.push(bench.name.clone());
                argv.push(bench.iterations.to_string());
                argv.push(bench.inner.to_string());
                argv
            }
            ExecutorKind::Command { vm, template } => {
                let mut argv = Vec::new();
                for word in template {
                    if word == "{classpath_args}" {
                        argv.extend(suite.classpath.iter().map(|p| p.display().to_string()));
                        continue;
                    }
                    let vm = vm
                        .as_ref()
                        .map(|p| p.display().to_string())
                        .unwrap_or_default();
                    argv.push(
                        word.replace("{vm}", &vm)
                            .replace("{classpath}", &suite.classpath_string())
                            .replace("{harness}", &suite.harness)
                            .replace("{bench}", &bench.name)
                            .replace("{iterations}", &bench.iterations.to_string())
                            .replace("{outer}", &bench.iterations.to_string())
                            .replace("{inner}", &bench.inner.to_string()),
                    );
                }
                argv
            }
        }
    }

    /// The command line that runs `bench` in lockstep with other VMs, its harness timed by
    /// CPU time ([`crate::lockstep`]); only Tally executors can (`None` for the others).
    pub fn argv_taking_turns(&self, suite: &Suite, bench: &Benchmark) -> Option<Vec<String>> {
        let ExecutorKind::Tally { .. } = &self.kind else {
            return None;
        };
        let mut argv = self.argv(suite, bench);
        argv.insert(1, crate::lockstep::TALLY_FLAG.to_string());
        Some(argv)
    }

    /// Fails unless the program the executor starts exists and is executable,
    /// so a wrong path is reported before hours of measuring the others.
    pub fn check_can_start(&self, suite: &Suite) -> Result<(), BenchError> {
        let argv = match suite.benchmarks.first() {
            Some(b) => self.argv(suite, b),
            None => return Ok(()),
        };
        let program = &argv[0];
        let resolved = resolve_program(program).ok_or_else(|| {
            exec_error(
                &self.name,
                format!("cannot start {program:?}: not found or not executable"),
            )
        })?;
        if resolved.is_dir() {
            return Err(exec_error(
                &self.name,
                format!("cannot start {program:?}: it is a directory"),
            ));
        }
        Ok(())
    }

    /// The executor's command for people: program and template or flags.
    pub fn describe(&self) -> String {
        match &self.kind {
            ExecutorKind::Tally { program, flags } => {
                let mut s = program.display().to_string();
                for f in flags {
                    s.push(' ');
                    s.push_str(f);
                }
                s
            }
            ExecutorKind::Command { vm, template } => {
                let t = template.join(" ");
                match vm {
                    Some(vm) => t.replace("{vm}", &vm.display().to_string()),
                    None => t,
                }
            }
        }
    }
}

fn exec_error(name: &str, message: String) -> BenchError {
    BenchError::Executor {
        name: name.to_string(),
        message,
    }
}

fn split_name(head: &str) -> Result<(String, Option<PathBuf>), BenchError> {
    let (name, path) = match head.split_once('@') {
        Some((n, p)) => (n, Some(PathBuf::from(p))),
        None => (head, None),
    };
    let valid = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '+'));
    if !valid {
        return Err(BenchError::Usage(format!(
            "executor name {name:?}: use letters, digits and - _ . + (it names files and columns)"
        )));
    }
    Ok((name.to_string(), path))
}

/// Where `program` would be started from: a path as given, or a bare name
/// looked up on `PATH` as the shell would.
pub fn resolve_program(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        p.metadata()
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
    };
    if program.contains('/') {
        let p = PathBuf::from(program);
        return executable(&p).then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| executable(p))
}

/// Splits a command template or flag string into words the way a POSIX
/// shell would for quotes and backslashes (no expansions), so templates can
/// be written as they would be typed.
pub fn split_words(s: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err(format!("unclosed ' in {s:?}")),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => word.push(c),
                            Some(c) => {
                                word.push('\\');
                                word.push(c);
                            }
                            None => return Err(format!("unclosed \" in {s:?}")),
                        },
                        Some(c) => word.push(c),
                        None => return Err(format!("unclosed \" in {s:?}")),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some(c) => word.push(c),
                    None => return Err(format!("trailing backslash in {s:?}")),
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn suite() -> Suite {
        Suite {
            name: "s".into(),
            source: "s.toml".into(),
            harness: "Harness".into(),
            classpath: vec![PathBuf::from("/a"), PathBuf::from("/b c")],
            benchmarks: vec![Benchmark {
                name: "Bounce".into(),
                iterations: 3,
                inner: 20,
            }],
        }
    }

    #[test]
    fn words_split_like_a_shell() {
        assert_eq!(
            split_words("a  'b c' \"d\\\"e\" f\\ g ''").unwrap(),
            ["a", "b c", "d\"e", "f g", ""]
        );
        assert!(split_words("'open").is_err());
        assert_eq!(split_words("  ").unwrap(), Vec::<String>::new());
    }

    #[test]
    fn tally_configuration_builds_a_tally_command_line() {
        let e = Executor::parse_tally("stress@/opt/tally=--gc-stress 1000", Path::new("/self"))
            .unwrap();
        assert_eq!(e.name, "stress");
        let s = suite();
        assert_eq!(
            e.argv(&s, &s.benchmarks[0]),
            [
                "/opt/tally",
                "--gc-stress",
                "1000",
                "-cp",
                "/a:/b c",
                "Harness",
                "Bounce",
                "3",
                "20"
            ]
        );
        let e = Executor::parse_tally("base", Path::new("/self")).unwrap();
        assert_eq!(e.argv(&s, &s.benchmarks[0])[0], "/self");
        let e = Executor::parse_tally("per=--inline-graph=/p/{bench}.tprof", Path::new("/self"))
            .unwrap();
        assert_eq!(
            e.argv(&s, &s.benchmarks[0])[1],
            "--inline-graph=/p/Bounce.tprof"
        );
        assert!(Executor::parse_tally("bad name", Path::new("/self")).is_err());
    }

    #[test]
    fn command_template_substitutes_placeholders() {
        let e = Executor::parse_command(
            "som-rs@/vm/som={vm} -c {classpath_args} -- {harness} {bench} {outer} {inner} --cp={classpath}",
        )
        .unwrap();
        let s = suite();
        assert_eq!(
            e.argv(&s, &s.benchmarks[0]),
            [
                "/vm/som",
                "-c",
                "/a",
                "/b c",
                "--",
                "Harness",
                "Bounce",
                "3",
                "20",
                "--cp=/a:/b c"
            ]
        );
        assert!(Executor::parse_command("x={vm} a")
            .unwrap_err()
            .to_string()
            .contains("no path"));
        assert!(Executor::parse_command("x=a {nope}")
            .unwrap_err()
            .to_string()
            .contains("unknown placeholder"));
        assert!(Executor::parse_command("x=a -c{classpath_args}").is_err());
        assert!(Executor::parse_command("just-a-name").is_err());
    }

    #[test]
    fn missing_programs_are_found_before_running() {
        let s = suite();
        let e = Executor::parse_command("x=/surely/not/here {bench}").unwrap();
        let msg = e.check_can_start(&s).unwrap_err().to_string();
        assert!(
            msg.contains("executor x") && msg.contains("/surely/not/here"),
            "{msg}"
        );
        assert!(Executor::parse_command("sh=sh -c true")
            .unwrap()
            .check_can_start(&s)
            .is_ok());
    }
}
