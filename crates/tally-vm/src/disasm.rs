//! `tally disasm`: a method's bytecode, each instruction with its source position and line,
//! and the blocks it creates after it; with a code generator, what it compiles each of them
//! into.

use std::fmt::Write as _;

use crate::bytecode::{CodeId, Op};
use crate::{Vm, VmError};

impl Vm {
    /// The bytecode of the methods named by `target`: `Class>>selector`, `Class class>>selector`
    /// or `Class` (every method of the class and its metaclass). The class is loaded from the
    /// class path (or the embedded library) if it is not loaded yet.
    /// With `generator`, each method and block is followed by what that compiler makes of it
    /// (`CodeGenerator::listing`); without `bytecode`, only that follows each one's heading
    /// (the code-generation fixtures check the two apart).
    pub fn disassemble(
        &mut self,
        target: &str,
        bytecode: bool,
        mut generator: Option<&mut dyn crate::jit::CodeGenerator>,
    ) -> Result<String, VmError> {
        let (class_part, selector) = match target.split_once(">>") {
            Some((c, s)) => (c.trim(), Some(s.trim())),
            None => (target.trim(), None),
        };
        let (class_name, meta) = match class_part.strip_suffix(" class") {
            Some(c) => (c.trim(), true),
            None => (class_part, false),
        };
        let sym = self.rt.symbols.intern(class_name);
        let Some(class) = self.load_class(sym)? else {
            return Err(VmError::Load(format!(
                "cannot find class {class_name} on the class path or in the embedded library"
            )));
        };
        let mut sides = vec![class];
        let metaclass = self.rt.class_of(self.rt.classes[class as usize].object);
        if meta {
            sides = vec![metaclass];
        } else if selector.is_none() {
            sides.push(metaclass);
        }
        let layout = crate::jit::Layout::new(&self.rt);
        let mut out = String::new();
        let mut found = 0;
        for side in sides {
            let info = &self.rt.classes[side as usize];
            let codes: Vec<CodeId> = info
                .method_order
                .iter()
                .filter(|s| selector.is_none_or(|want| self.rt.symbols.name(**s) == want))
                .map(|s| info.methods[s])
                .collect();
            for code in codes {
                found += 1;
                self.write_code(&mut out, code, bytecode, &mut generator, &layout);
            }
        }
        if found == 0 {
            return Err(VmError::Load(format!(
                "{class_part} has no method {}",
                selector.unwrap_or("")
            )));
        }
        Ok(out)
    }

    /// Writes code `id` (its heading, its bytecode when `bytecode`, the generator's listing)
    /// and then the blocks it creates, each the same way.
    fn write_code(
        &self,
        out: &mut String,
        id: CodeId,
        bytecode: bool,
        generator: &mut Option<&mut dyn crate::jit::CodeGenerator>,
        layout: &crate::jit::Layout,
    ) {
        let code = self.rt.codes[id as usize];
        let source = self.rt.sources.get(code.source as usize);
        let path = source.map(|s| s.path().to_string()).unwrap_or_default();
        let name = self.rt.code_name(code);
        let _ = writeln!(
            out,
            "{name}  ({path}:{}; {} argument(s), {} local(s){})",
            code.source_line,
            code.num_args,
            code.num_locals,
            if code.primitive.is_some() {
                ", primitive"
            } else {
                ""
            }
        );
        let mut blocks = Vec::new();
        let mut last_line = 0;
        for (bci, op) in code.ops.iter().enumerate() {
            if let Op::PushBlock(b) = op {
                blocks.push(*b);
            }
            if !bytecode {
                continue;
            }
            let (line, col) = code.positions.get(bci).copied().unwrap_or((0, 0));
            let text = if line != last_line {
                last_line = line;
                source.map(|s| s.line_text(line).trim()).unwrap_or("")
            } else {
                ""
            };
            let row = format!(
                "  {bci:>4}  {:<36} {line:>5}:{col:<4} {text}",
                self.op_text(*op)
            );
            let _ = writeln!(out, "{}", row.trim_end());
        }
        if bytecode {
            out.push('\n');
        }
        if let (Some(g), false) = (generator.as_deref_mut(), code.ops.is_empty()) {
            let tier = g.tier().name();
            if !code.plain_frame {
                let _ = writeln!(
                    out,
                    "--- {tier}: not compiled: a trivial method (getter, setter, constant, \
                     literal or self), answered at its send sites"
                );
            } else {
                match g.listing(
                    &crate::jit::CompileRequest::new(code, &self.rt, self.speculation()),
                    layout,
                ) {
                    Ok(text) => out.push_str(&text),
                    Err(why) => {
                        let _ = writeln!(out, "--- {tier}: not compiled: {why}");
                    }
                }
            }
            out.push('\n');
        }
        for b in blocks {
            self.write_code(out, b, bytecode, generator, layout);
        }
    }

    /// An instruction with its operands named: selectors for sends, values for constants.
    pub(crate) fn op_text(&self, op: Op) -> String {
        let site = |s: u32| {
            let site = &self.rt.sites[s as usize];
            format!("#{}", self.rt.symbols.name(site.selector))
        };
        match op {
            Op::Send(s) => format!("Send {}", site(s)),
            Op::SendBinary(s) => format!("SendBinary {}", site(s)),
            Op::SuperSend(s) => format!("SuperSend {}", site(s)),
            Op::SendIsNil(s) => format!("SendIsNil {}", site(s)),
            Op::SendNotNil(s) => format!("SendNotNil {}", site(s)),
            Op::PushLocalSend(i, s) => format!("PushLocalSend({i}) {}", site(s)),
            Op::PushLocalSendBinary(i, s) => format!("PushLocalSendBinary({i}) {}", site(s)),
            Op::PushConstSendBinary(v, s) => {
                format!("PushConstSendBinary({}) {}", self.describe(v), site(s))
            }
            Op::SendCompareJumpIfFalse(s, t) | Op::SendCompareJumpIfTrue(s, t) => {
                let kind = if matches!(op, Op::SendCompareJumpIfTrue(..)) {
                    "SendCompareJumpIfTrue"
                } else {
                    "SendCompareJumpIfFalse"
                };
                format!("{kind} {} -> {t}", site(s))
            }
            Op::PushConst(v) => format!("PushConst {}", self.describe(v)),
            Op::PushLiteral(i) => format!(
                "PushLiteral {}",
                self.describe(self.rt.literals[i as usize])
            ),
            Op::PushGlobal(slot) => format!(
                "PushGlobal {}",
                self.rt.symbols.name(self.rt.global_names[slot as usize])
            ),
            Op::PushBlock(b) => {
                format!("PushBlock {}", self.rt.code_name(self.rt.codes[b as usize]))
            }
            _ => format!("{op:?}"),
        }
    }
}
