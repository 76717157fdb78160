//! The IR's text ([`crate::print`]) read back into a function, so that a pass can be run on
//! a listing and its output compared (the filetests in `tests/ir/`).
//!
//! The function reads back exactly: values and frame states keep their numbers (the header
//! gives their counts; values no line defines are left undefined), blocks their order, and
//! printing it again gives the same text. Only the instruction arena is renumbered, which
//! no listing shows. Codes and sites are named through a [`NameTable`]; the function's own
//! code is the one its name names there.

use crate::syntax::NameTable;
use crate::{
    Block, BlockId, Edge, FrameState, FrameStateId, Function, Inst, InstId, InstKind, OsrEntry,
    Resume, Scope, ScopeId, Terminator, Ty, ValueData, ValueDef, ValueId,
};

/// The function `text` lists.
pub fn parse(text: &str, names: &NameTable) -> Result<Function, String> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let (_, header) = lines.next().ok_or("no function")?;
    let mut p = Parser::new(header, names)?;
    for (n, line) in lines {
        p.line(line)
            .map_err(|e| format!("line {}: {e}: `{}`", n + 1, line.trim()))?;
    }
    p.finish()
}

struct Parser<'n> {
    f: Function,
    names: &'n NameTable,
    blocks: usize,
    states: usize,
}

impl<'n> Parser<'n> {
    /// From the header: `function NAME: B blocks, V values, S frame states`.
    fn new(header: &str, names: &'n NameTable) -> Result<Parser<'n>, String> {
        let rest = header
            .strip_prefix("function ")
            .ok_or("expected `function NAME: …`")?;
        let (name, counts) = rest
            .rsplit_once(": ")
            .ok_or("expected the counts after the name")?;
        let counts: Vec<usize> = counts
            .split(", ")
            .map(|c| c.split(' ').next().and_then(|n| n.parse().ok()))
            .collect::<Option<_>>()
            .ok_or("expected `B blocks, V values, S frame states`")?;
        let [blocks, values, states] = counts[..] else {
            return Err("expected three counts".into());
        };
        let code = names
            .code_named(name)
            .ok_or_else(|| format!("no code is named `{name}`"))?;
        let mut f = Function::new(code, name.to_string());
        // Values no line defines stay undefined: a parameter of no block.
        let undefined = ValueData {
            def: ValueDef::Param {
                block: BlockId(u32::MAX),
                index: 0,
            },
            ty: Ty::Word,
        };
        f.values = vec![undefined; values];
        Ok(Parser {
            f,
            names,
            blocks,
            states,
        })
    }

    fn line(&mut self, line: &str) -> Result<(), String> {
        let text = line.trim();
        if text.starts_with("block") && !line.starts_with(' ') {
            return self.block(text);
        }
        if let Some(rest) = text.strip_prefix("fs").filter(|_| !line.starts_with(' ')) {
            return self.state(rest);
        }
        if let Some(rest) = text.strip_prefix('s').filter(|_| !line.starts_with(' ')) {
            return self.scope(rest);
        }
        let block = self
            .f
            .blocks
            .len()
            .checked_sub(1)
            .ok_or("outside a block")?;
        if let Some(term) = self.terminator(text)? {
            self.f.blocks[block].term = term;
            return Ok(());
        }
        self.inst(BlockId(block as u32), text)
    }

    fn finish(self) -> Result<Function, String> {
        if self.f.blocks.len() != self.blocks {
            return Err(format!(
                "{} blocks, the header says {}",
                self.f.blocks.len(),
                self.blocks
            ));
        }
        if self.f.states.len() != self.states {
            return Err(format!(
                "{} frame states, the header says {}",
                self.f.states.len(),
                self.states
            ));
        }
        Ok(self.f)
    }

    /// `blockN(v1: word, …):   @BCI[ in sK]`
    fn block(&mut self, text: &str) -> Result<(), String> {
        let (head, at) = text.rsplit_once(" @").ok_or("expected `@BCI`")?;
        let (bci, scope) = match at.split_once(" in ") {
            Some((bci, scope)) => (bci, scope_id(scope)?),
            None => (at, ScopeId(0)),
        };
        let head = head.trim_end().strip_suffix("):").ok_or("expected `):`")?;
        let (id, params) = head.split_once('(').ok_or("expected `(`")?;
        let id = number(id.strip_prefix("block").ok_or("expected `blockN`")?)?;
        if id as usize != self.f.blocks.len() {
            return Err(format!("block{id} out of order"));
        }
        let block = BlockId(id);
        let mut values = Vec::new();
        for (index, param) in params.split(", ").filter(|p| !p.is_empty()).enumerate() {
            let (v, ty) = param.split_once(": ").ok_or("expected `vN: TYPE`")?;
            let v = value_id(v)?;
            self.define(
                v,
                ValueDef::Param {
                    block,
                    index: index as u32,
                },
                ty_named(ty)?,
            )?;
            values.push(v);
        }
        self.f.blocks.push(Block {
            scope,
            params: values,
            insts: Vec::new(),
            term: Terminator::Unreachable,
            bci: number(bci)?,
        });
        Ok(())
    }

    fn define(&mut self, v: ValueId, def: ValueDef, ty: Ty) -> Result<(), String> {
        let data = self
            .f
            .values
            .get_mut(v.index())
            .ok_or_else(|| format!("{v} beyond the header's count"))?;
        *data = ValueData { def, ty };
        Ok(())
    }

    /// `[vN = ]TEXT[: TYPE]   @BCI[  fsK]`
    fn inst(&mut self, block: BlockId, text: &str) -> Result<(), String> {
        let (body, at) = text.rsplit_once(" @").ok_or("expected `@BCI`")?;
        let (bci, state) = match at.split_once("  ") {
            Some((bci, state)) => (bci, Some(state_id(state.trim())?)),
            None => (at, None),
        };
        let body = body.trim_end();
        let (result, kind_text) = match body.split_once(" = ") {
            Some((v, rest)) if v.starts_with('v') && value_id(v).is_ok() => {
                let (kind, ty) = rest.rsplit_once(": ").ok_or("expected `: TYPE`")?;
                (Some((value_id(v)?, ty_named(ty)?)), kind)
            }
            _ => (None, body),
        };
        let kind = InstKind::parse(kind_text, self.names)?;
        if kind.props().result.is_some() != result.is_some() {
            return Err(
                "a result where the instruction defines none, or none where it does".into(),
            );
        }
        let id = InstId(self.f.insts.len() as u32);
        if let Some((v, ty)) = result {
            self.define(v, ValueDef::Inst(id), ty)?;
        }
        self.f.insts.push(Inst {
            kind,
            result: result.map(|(v, _)| v),
            state,
            bci: number(bci)?,
        });
        self.f.blocks[block.index()].insts.push(id);
        Ok(())
    }

    /// A terminator, or `None` when the line is none.
    fn terminator(&self, text: &str) -> Result<Option<Terminator>, String> {
        let (word, rest) = text.split_once(' ').unwrap_or((text, ""));
        Ok(Some(match word {
            "jump" => Terminator::Jump(edge(rest)?),
            "branch" => {
                let (cond, edges) = rest.split_once(", ").ok_or("expected `COND, EDGE, EDGE`")?;
                let (then, otherwise) = split_edges(edges)?;
                Terminator::Branch {
                    cond: value_id(cond)?,
                    then: edge(then)?,
                    otherwise: edge(otherwise)?,
                }
            }
            "return" => Terminator::Return(value_id(rest)?),
            "return_non_local" => {
                let (value, state) = rest.split_once("  ").ok_or("expected `VALUE  STATE`")?;
                Terminator::ReturnNonLocal {
                    value: value_id(value)?,
                    state: state_id(state)?,
                }
            }
            "deopt" => Terminator::Deopt(state_id(rest)?),
            "enter" => {
                let mut parts = rest.split(", osr at ");
                let normal = edge(parts.next().ok_or("expected an edge")?)?;
                let osr = parts
                    .map(|o| {
                        let (at, e) = o.split_once(": ").ok_or("expected `BCI (stack N): EDGE`")?;
                        let (bci, height) = at
                            .strip_suffix(')')
                            .and_then(|a| a.split_once(" (stack "))
                            .ok_or("expected `BCI (stack N)`")?;
                        Ok(OsrEntry {
                            bci: number(bci)?,
                            edge: edge(e)?,
                            height: number(height)?,
                        })
                    })
                    .collect::<Result<Vec<_>, String>>()?;
                Terminator::Enter { normal, osr }
            }
            "unreachable" => Terminator::Unreachable,
            _ => return Ok(None),
        }))
    }

    /// `K: NAME @BCI before|after call  locals [..]  stack [..][  context v][  closure v]
    /// [  v = [..]]…[  in fsO]` (the `fs` taken).
    fn state(&mut self, text: &str) -> Result<(), String> {
        let (k, rest) = text.split_once(": ").ok_or("expected `fsK: `")?;
        if number(k)? as usize != self.f.states.len() {
            return Err(format!("fs{k} out of order"));
        }
        let (name, rest) = split_at_position(rest).ok_or("expected `NAME @BCI before`")?;
        let code = self
            .names
            .code_named(name)
            .ok_or_else(|| format!("no code is named `{name}`"))?;
        let mut parts = rest.split("  ");
        let at = parts.next().ok_or("expected `BCI before`")?;
        let (bci, resume) = at.split_once(' ').ok_or("expected `BCI before`")?;
        let resume = match resume {
            "before" => Resume::Before,
            "after call" => Resume::AfterCall,
            other => return Err(format!("`{other}` is neither `before` nor `after call`")),
        };
        let mut state = FrameState {
            code,
            bci: number(bci)?,
            resume,
            locals: Vec::new(),
            stack: Vec::new(),
            context: None,
            closure: None,
            outer: None,
            virtuals: Vec::new(),
        };
        for part in parts {
            if let Some(l) = part.strip_prefix("locals ") {
                state.locals = list(l)?
                    .iter()
                    .map(|v| {
                        if *v == "-" {
                            Ok(None)
                        } else {
                            value_id(v).map(Some)
                        }
                    })
                    .collect::<Result<_, String>>()?;
            } else if let Some(s) = part.strip_prefix("stack ") {
                state.stack = values(s)?;
            } else if let Some(c) = part.strip_prefix("context ") {
                state.context = Some(value_id(c)?);
            } else if let Some(c) = part.strip_prefix("closure ") {
                state.closure = Some(value_id(c)?);
            } else if let Some(o) = part.strip_prefix("in ") {
                state.outer = Some(state_id(o)?);
            } else if let Some((v, slots)) = part.split_once(" = ") {
                state.virtuals.push((value_id(v)?, values(slots)?));
            } else {
                return Err(format!("`{part}` is no part of a frame state"));
            }
        }
        self.f.states.push(state);
        Ok(())
    }

    /// `K: NAME inlined in sP @BCI` (the `s` taken).
    fn scope(&mut self, text: &str) -> Result<(), String> {
        let (k, rest) = text.split_once(": ").ok_or("expected `sK: `")?;
        if number(k)? as usize != self.f.scopes.len() {
            return Err(format!("s{k} out of order"));
        }
        let (name, parent) = rest
            .rsplit_once(" inlined in ")
            .ok_or("expected `NAME inlined in sP @BCI`")?;
        let (parent, bci) = parent.split_once(" @").ok_or("expected `sP @BCI`")?;
        let code = self
            .names
            .code_named(name)
            .ok_or_else(|| format!("no code is named `{name}`"))?;
        self.f.scopes.push(Scope {
            code,
            parent: Some((scope_id(parent)?, number(bci)?)),
        });
        Ok(())
    }
}

/// A code's name and what follows its ` @BCI` in a frame state, where the bytecode index
/// is followed by where it resumes (a name may hold ` @`).
fn split_at_position(text: &str) -> Option<(&str, &str)> {
    let mut from = 0;
    while let Some(k) = text[from..].find(" @") {
        let at = from + k;
        let rest = &text[at + 2..];
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        let tail = &rest[digits..];
        if digits > 0 && (tail.starts_with(" before") || tail.starts_with(" after call")) {
            return Some((&text[..at], rest));
        }
        from = at + 2;
    }
    None
}

fn number(text: &str) -> Result<u32, String> {
    text.trim()
        .parse()
        .map_err(|_| format!("expected a number, found `{text}`"))
}

fn value_id(text: &str) -> Result<ValueId, String> {
    let n = text.trim().strip_prefix('v').ok_or("expected `vN`")?;
    number(n).map(ValueId)
}

fn state_id(text: &str) -> Result<FrameStateId, String> {
    let n = text.trim().strip_prefix("fs").ok_or("expected `fsN`")?;
    number(n).map(FrameStateId)
}

fn scope_id(text: &str) -> Result<ScopeId, String> {
    let n = text.trim().strip_prefix('s').ok_or("expected `sN`")?;
    number(n).map(ScopeId)
}

fn ty_named(text: &str) -> Result<Ty, String> {
    [Ty::Word, Ty::Int, Ty::Flag, Ty::Float]
        .into_iter()
        .find(|t| t.name() == text.trim())
        .ok_or_else(|| format!("no type is called `{text}`"))
}

/// The items of `[a, b, c]`.
fn list(text: &str) -> Result<Vec<&str>, String> {
    let inner = text
        .trim()
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .ok_or("expected `[…]`")?;
    Ok(inner.split(", ").filter(|s| !s.is_empty()).collect())
}

fn values(text: &str) -> Result<Vec<ValueId>, String> {
    list(text)?.into_iter().map(value_id).collect()
}

/// `blockN(v1, v2)`
fn edge(text: &str) -> Result<Edge, String> {
    let (block, args) = text.trim().split_once('(').ok_or("expected `blockN(…)`")?;
    let args = args.strip_suffix(')').ok_or("expected `)`")?;
    let block = number(block.strip_prefix("block").ok_or("expected `blockN`")?)?;
    Ok(Edge {
        block: BlockId(block),
        args: args
            .split(", ")
            .filter(|a| !a.is_empty())
            .map(value_id)
            .collect::<Result<_, _>>()?,
    })
}

/// `blockA(…), blockB(…)` as the two edges.
fn split_edges(text: &str) -> Result<(&str, &str), String> {
    let close = text.find(')').ok_or("expected `)`")?;
    let (first, rest) = text.split_at(close + 1);
    let second = rest.strip_prefix(", ").ok_or("expected a second edge")?;
    Ok((first, second))
}
