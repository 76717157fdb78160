//! IR filetests: each `tests/ir/NAME.tir` names a pass (or the whole pipeline), holds the IR
//! it runs on as `tally disasm --show=tally-ir` prints it, the lines its output must hold
//! (`; check:`, `; nextln:`, `; sameln:`, `; not:`), and its whole output (`; output:`), so
//! that what a pass does to a function is tested without the bytecode builder in front of
//! it. The format is described in `tests/ir/README.md`.
//!
//! `TALLY_BLESS=1 cargo test -p tally-ir --test filetests` rewrites the output of every file
//! in place (the check lines stay: they are what the test asserts); review the diff with
//! `git diff tests/ir` before committing.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use tally_heap::Value;
use tally_ir::passes::{optimize, Codes, Pass, Unobserved};
use tally_ir::print::print;
use tally_ir::verify::verify;
use tally_ir::NameTable;
use tally_vm::bytecode::Op;
use tally_vm::compiler::{CodeKind, CompiledCode};
use tally_vm::runtime::Code;

/// What a file runs: one pass, or every pass in the compiler's order.
#[derive(Clone, Copy, Debug)]
enum Run {
    Pass(Pass),
    Pipeline,
}

/// A line the output must hold, found in order.
#[derive(Debug)]
enum Directive {
    /// `; check: TEXT`: a later line holds TEXT.
    Check(String),
    /// `; nextln: TEXT`: the line after the last one found holds TEXT.
    NextLine(String),
    /// `; sameln: TEXT`: the last line found holds TEXT too (after what it was found by).
    SameLine(String),
    /// `; not: TEXT`: no line between the last one found and the next holds TEXT.
    Not(String),
}

struct FileTest {
    run: Run,
    names: NameTable,
    codes: HashMap<u32, &'static Code>,
    input: String,
    directives: Vec<Directive>,
    /// The file up to its output, as written.
    head: String,
    /// The output the file holds, if any.
    output: Option<String>,
}

const OUTPUT: &str = "; output:";

fn parse_file(text: &str) -> Result<FileTest, String> {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.starts_with("function "))
        .ok_or("no `function …` line: the input IR")?;
    let mut run = None;
    let mut names = NameTable::default();
    let mut codes = HashMap::new();
    let mut k = 0;
    while k < start {
        let line = lines[k].trim_end();
        k += 1;
        if line.is_empty() || line.starts_with(';') {
            continue;
        }
        let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
        match word {
            "pass" if rest == "pipeline" => run = Some(Run::Pipeline),
            "pass" => {
                let pass = Pass::named(rest).ok_or_else(|| format!("no pass is called {rest}"))?;
                run = Some(Run::Pass(pass));
            }
            "site" => {
                let (id, name) = rest.split_once(' ').ok_or("expected `site ID NAME`")?;
                names.add_site(number(id)?, name);
            }
            "code" if rest.ends_with(')') => {
                let mut ops = Vec::new();
                while k < start && lines[k].starts_with("  ") {
                    ops.push(op(lines[k].trim(), ops.len())?);
                    k += 1;
                }
                let (id, name, code) = code(rest, ops)?;
                names.add_code(id, name);
                codes.insert(id, code);
            }
            // A code named, whose bytecode the pass does not read.
            "code" => {
                let (id, name) = rest.split_once(' ').ok_or("expected `code ID NAME`")?;
                names.add_code(number(id)?, name);
            }
            _ => return Err(format!("`{line}` is neither `pass`, `code` nor `site`")),
        }
    }
    let run = run.ok_or("no `pass NAME` line")?;
    let end = (start..lines.len())
        .find(|&i| lines[i].starts_with(';'))
        .unwrap_or(lines.len());
    let input: String = lines[start..end].iter().map(|l| format!("{l}\n")).collect();
    let mut directives = Vec::new();
    let mut k = end;
    while k < lines.len() && lines[k] != OUTPUT {
        let line = lines[k].trim();
        k += 1;
        for (prefix, make) in [
            ("; check: ", Directive::Check as fn(String) -> Directive),
            ("; nextln: ", Directive::NextLine),
            ("; sameln: ", Directive::SameLine),
            ("; not: ", Directive::Not),
        ] {
            if let Some(text) = line.strip_prefix(prefix) {
                directives.push(make(text.to_string()));
            }
        }
    }
    let head: String = lines[..k].iter().map(|l| format!("{l}\n")).collect();
    let output = (k < lines.len()).then(|| {
        lines[k + 1..]
            .iter()
            .map(|l| {
                format!(
                    "{}\n",
                    l.strip_prefix("; ").unwrap_or(l.trim_start_matches(';'))
                )
            })
            .collect::<String>()
            .trim_end()
            .to_string()
            + "\n"
    });
    Ok(FileTest {
        run,
        names,
        codes,
        input,
        directives,
        head,
        output,
    })
}

fn number(text: &str) -> Result<u32, String> {
    text.trim()
        .parse()
        .map_err(|_| format!("expected a number, found `{text}`"))
}

/// `ID NAME (method|block, A argument(s), L local(s), context C)` and its bytecode.
fn code(text: &str, ops: Vec<Op>) -> Result<(u32, String, &'static Code), String> {
    let (id, rest) = text.split_once(' ').ok_or("expected `code ID NAME (…)`")?;
    let (name, shape) = rest.rsplit_once(" (").ok_or("expected `NAME (…)`")?;
    let shape = shape.strip_suffix(')').ok_or("expected `)`")?;
    let parts: Vec<&str> = shape.split(", ").collect();
    let [kind, args, locals, context] = parts[..] else {
        return Err("expected `(KIND, A argument(s), L local(s), context C)`".into());
    };
    let kind = match kind {
        "method" => CodeKind::Method,
        "block" => CodeKind::Block,
        other => return Err(format!("`{other}` is neither `method` nor `block`")),
    };
    let first = |s: &str| number(s.split(' ').next().unwrap_or(""));
    let context = number(
        context
            .strip_prefix("context ")
            .ok_or("expected `context C`")?,
    )?;
    let id = number(id)?;
    let compiled = CompiledCode {
        kind,
        selector: 0,
        holder: 0,
        positions: vec![(1, 1); ops.len()],
        ops,
        num_args: first(args)? as u16,
        num_locals: first(locals)? as u16,
        context_size: context as u16,
        captured_args: Vec::new(),
        source_line: 1,
        source: 0,
    };
    let code = Box::leak(Box::new(Code::from_compiled(id, compiled, 16)));
    Ok((id, name.to_string(), code))
}

/// One bytecode instruction, written as `Op`'s `Debug` shows it, after its index.
fn op(line: &str, at: usize) -> Result<Op, String> {
    let (bci, text) = line.split_once(' ').ok_or("expected `BCI OP`")?;
    if number(bci)? as usize != at {
        return Err(format!("bytecode {bci} out of order"));
    }
    let name_end = text
        .find(|c: char| !c.is_ascii_alphanumeric())
        .unwrap_or(text.len());
    let (name, rest) = text.split_at(name_end);
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .or_else(|| rest.strip_prefix('{').and_then(|r| r.strip_suffix('}')))
        .unwrap_or(rest)
        .trim();
    let args: Vec<&str> = if inner.is_empty() {
        Vec::new()
    } else {
        inner
            .split(", ")
            .map(|a| a.split_once(": ").map_or(a, |(_, v)| v).trim())
            .collect()
    };
    let n = |k: usize| -> Result<u32, String> {
        number(
            args.get(k)
                .ok_or_else(|| format!("{name} takes more operands"))?,
        )
    };
    let value = |k: usize| -> Result<Value, String> {
        let a = *args.get(k).ok_or("a constant")?;
        Ok(match a {
            "nil" => Value::NIL,
            "true" => Value::TRUE,
            "false" => Value::FALSE,
            _ => {
                let inside =
                    |prefix: &str| a.strip_prefix(prefix).and_then(|i| i.strip_suffix(')'));
                let int = inside("Int(").and_then(|i| i.parse().ok());
                let float = inside("Float(")
                    .and_then(|f| f.parse().ok())
                    .and_then(Value::from_small_float);
                int.map(Value::from_small_int)
                    .or(float)
                    .ok_or_else(|| format!("`{a}` is no constant this reads"))?
            }
        })
    };
    let local = |k: usize| n(k).map(|v| v as u16);
    Ok(match name {
        "PushLocal" => Op::PushLocal(local(0)?),
        "StoreLocal" => Op::StoreLocal(local(0)?),
        "PopLocal" => Op::PopLocal(local(0)?),
        "PushCtx" => Op::PushCtx {
            level: n(0)? as u8,
            index: local(1)?,
        },
        "StoreCtx" => Op::StoreCtx {
            level: n(0)? as u8,
            index: local(1)?,
        },
        "PopCtx" => Op::PopCtx {
            level: n(0)? as u8,
            index: local(1)?,
        },
        "PushField" => Op::PushField(local(0)?),
        "StoreField" => Op::StoreField(local(0)?),
        "PopField" => Op::PopField(local(0)?),
        "PushLiteral" => Op::PushLiteral(n(0)?),
        "PushConst" => Op::PushConst(value(0)?),
        "PushGlobal" => Op::PushGlobal(n(0)?),
        "PushBlock" => Op::PushBlock(n(0)?),
        "Pop" => Op::Pop,
        "Dup" => Op::Dup,
        "Send" => Op::Send(n(0)?),
        "SendBinary" => Op::SendBinary(n(0)?),
        "SuperSend" => Op::SuperSend(n(0)?),
        "Return" => Op::Return,
        "ReturnNonLocal" => Op::ReturnNonLocal,
        "ReturnSelf" => Op::ReturnSelf,
        "Jump" => Op::Jump(n(0)?),
        "JumpIfTrue" => Op::JumpIfTrue(n(0)?),
        "JumpIfFalse" => Op::JumpIfFalse(n(0)?),
        "JumpBack" => Op::JumpBack(n(0)?),
        "PushLocal2" => Op::PushLocal2(local(0)?, local(1)?),
        "PopPushLocal" => Op::PopPushLocal(local(0)?),
        "PopPushField" => Op::PopPushField(local(0)?),
        "PushLocalSend" => Op::PushLocalSend(local(0)?, n(1)?),
        "PushLocalSendBinary" => Op::PushLocalSendBinary(local(0)?, n(1)?),
        "PushConstSendBinary" => Op::PushConstSendBinary(value(0)?, n(1)?),
        "ReturnLocal" => Op::ReturnLocal(local(0)?),
        "ReturnField" => Op::ReturnField(local(0)?),
        "SendCompareJumpIfFalse" => Op::SendCompareJumpIfFalse(n(0)?, n(1)?),
        "SendCompareJumpIfTrue" => Op::SendCompareJumpIfTrue(n(0)?, n(1)?),
        "SendIsNil" => Op::SendIsNil(n(0)?),
        "SendNotNil" => Op::SendNotNil(n(0)?),
        _ => return Err(format!("no bytecode is called {name}")),
    })
}

/// The IR the file's pass makes of its input.
fn run(t: &FileTest) -> Result<String, String> {
    let mut f = tally_ir::parse::parse(&t.input, &t.names)?;
    verify(&f).map_err(|e| format!("the input is invalid: {e}"))?;
    let own = t.codes.get(&f.code).copied();
    let inlined = |id: u32| t.codes.get(&id).copied();
    match t.run {
        Run::Pass(pass) => {
            let codes = Codes {
                own,
                inlined: &inlined,
            };
            pass.run(&mut f, &codes)?;
            verify(&f).map_err(|e| format!("invalid after {}: {e}", pass.name()))?;
        }
        Run::Pipeline => {
            let own = own.ok_or("the pipeline reads the function's bytecode: give its code")?;
            optimize(&mut f, own, &inlined, &mut Unobserved)?;
        }
    }
    Ok(print(&f, &t.names))
}

/// Where the directives fail on `output`, if they do.
fn check(directives: &[Directive], output: &str) -> Result<(), String> {
    let lines: Vec<&str> = output.lines().collect();
    // The next line to search from, and the `not`s waiting for the next match.
    let mut at = 0;
    let mut last: Option<usize> = None;
    let mut nots: Vec<&str> = Vec::new();
    let settle_nots = |nots: &mut Vec<&str>, from: usize, to: usize| -> Result<(), String> {
        for text in nots.drain(..) {
            if let Some(k) = (from..to).find(|&k| lines[k].contains(text)) {
                return Err(format!("`not: {text}` found at output line {}", k + 1));
            }
        }
        Ok(())
    };
    for d in directives {
        match d {
            Directive::Check(text) => {
                let found = (at..lines.len())
                    .find(|&k| lines[k].contains(text.as_str()))
                    .ok_or_else(|| format!("`check: {text}` not found after line {at}"))?;
                settle_nots(&mut nots, at, found)?;
                last = Some(found);
                at = found + 1;
            }
            Directive::NextLine(text) => {
                let k = last.map_or(0, |l| l + 1);
                if !lines.get(k).is_some_and(|l| l.contains(text.as_str())) {
                    return Err(format!("`nextln: {text}` is not output line {}", k + 1));
                }
                settle_nots(&mut nots, at, k)?;
                last = Some(k);
                at = k + 1;
            }
            Directive::SameLine(text) => {
                let k = last.ok_or_else(|| format!("`sameln: {text}` before any line found"))?;
                if !lines[k].contains(text.as_str()) {
                    return Err(format!("`sameln: {text}` is not in output line {}", k + 1));
                }
            }
            Directive::Not(text) => nots.push(text),
        }
    }
    settle_nots(&mut nots, at, lines.len())
}

/// `output` as the file holds it after `; output:`.
fn as_comment(output: &str) -> String {
    output
        .lines()
        .map(|l| {
            if l.is_empty() {
                ";\n".to_string()
            } else {
                format!("; {l}\n")
            }
        })
        .collect()
}

/// The first lines where `expected` and `actual` differ, with a little context.
fn first_difference(expected: &str, actual: &str) -> String {
    let (e, a): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), actual.lines().collect());
    let k = (0..e.len().max(a.len()))
        .find(|&k| e.get(k) != a.get(k))
        .unwrap_or(0);
    let show = |lines: &[&str]| {
        lines
            .iter()
            .skip(k.saturating_sub(2))
            .take(6)
            .map(|l| format!("    {l}\n"))
            .collect::<String>()
    };
    format!(
        "output line {}:\n  expected:\n{}  actual:\n{}",
        k + 1,
        show(&e),
        show(&a)
    )
}

fn files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/ir");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "tir"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_filetest_holds() {
    let bless = std::env::var_os("TALLY_BLESS").is_some_and(|v| v == "1");
    let mut failures = Vec::new();
    let files = files();
    assert!(!files.is_empty(), "no filetests in tests/ir");
    for path in &files {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let text = std::fs::read_to_string(path).expect("a readable filetest");
        let outcome = parse_file(&text).and_then(|t| {
            let output = run(&t)?;
            check(&t.directives, &output)?;
            if bless {
                let mut blessed = t.head.trim_end().to_string();
                blessed.push_str(&format!("\n\n{OUTPUT}\n{}", as_comment(&output)));
                std::fs::write(path, blessed).map_err(|e| e.to_string())?;
            } else if t.output.as_deref() != Some(output.as_str()) {
                let expected = t.output.as_deref().unwrap_or("");
                return Err(format!(
                    "the output differs (bless with TALLY_BLESS=1): {}",
                    first_difference(expected, &output)
                ));
            }
            Ok(())
        });
        if let Err(e) = outcome {
            failures.push(format!("{name}: {e}"));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n\n"));
}

#[test]
fn checks_find_lines_in_order_and_nots_between_them() {
    let out = "a\nb\nc\nd\n";
    let d = |v: &[(&str, &str)]| -> Vec<Directive> {
        v.iter()
            .map(|&(k, t)| match k {
                "check" => Directive::Check(t.into()),
                "nextln" => Directive::NextLine(t.into()),
                _ => Directive::Not(t.into()),
            })
            .collect()
    };
    assert!(check(&d(&[("check", "a"), ("nextln", "b"), ("check", "d")]), out).is_ok());
    assert!(check(&d(&[("check", "b"), ("check", "a")]), out).is_err());
    assert!(check(&d(&[("check", "a"), ("nextln", "c")]), out).is_err());
    assert!(check(&d(&[("check", "a"), ("not", "c"), ("check", "d")]), out).is_err());
    assert!(check(&d(&[("check", "a"), ("not", "d"), ("check", "c")]), out).is_ok());
    assert!(check(&d(&[("check", "c"), ("not", "a")]), out).is_ok());
}
