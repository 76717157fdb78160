//! `tally disasm`'s listing of the template compiler's code: its machine instructions
//! (decoded by iced-x86, Intel syntax) under the bytecode index each run serves, offsets from
//! the function's start, the addresses it embeds by name.

use super::Assembled;
use iced_x86::{Decoder, DecoderOptions, Formatter, IntelFormatter, OpKind};
use std::fmt::Write as _;

/// The listing of `code`; `names` are the addresses listings print by name.
/// `base` is the address the code was assembled for.
pub(super) fn listing(code: &Assembled, base: usize, names: &[(String, usize)]) -> String {
    let mut out = String::new();
    let table_at = code.table_at;
    let _ = writeln!(
        out,
        "--- baseline: machine code ({} bytes and a resume table of {}), by bytecode index \
         (@-: no one bytecode)",
        table_at,
        code.bytes.len() - table_at
    );
    let mut formatter = IntelFormatter::new();
    formatter.options_mut().set_hex_prefix("0x");
    formatter.options_mut().set_hex_suffix("");
    formatter.options_mut().set_uppercase_hex(false);
    formatter.options_mut().set_branch_leading_zeros(false);
    formatter.options_mut().set_leading_zeros(false);
    // Decoded from offset 0, so that jumps within the function show offsets, the same in
    // every run; targets outside it (routines, trampolines) are named.
    let mut decoder = Decoder::with_ip(64, &code.bytes[..table_at], 0, DecoderOptions::NONE);
    let relative: Vec<(String, u64)> = names
        .iter()
        .map(|(name, address)| (name.clone(), (*address as u64).wrapping_sub(base as u64)))
        .collect();
    let mut runs = code.pc_map.iter().peekable();
    let mut text = String::new();
    while decoder.can_decode() {
        let at = decoder.ip() as u32;
        while let Some(&&(start, bci)) = runs.peek() {
            if start > at {
                break;
            }
            runs.next();
            if start == at {
                match bci {
                    Some(b) => {
                        let _ = writeln!(out, "@{b}:");
                    }
                    None => {
                        let _ = writeln!(out, "@-:");
                    }
                }
            }
        }
        let instruction = decoder.decode();
        text.clear();
        formatter.format(&instruction, &mut text);
        for (name, address) in names {
            text = crate::compiler::replace_token(&text, &format!("{address:#x}"), name);
        }
        if instruction.op0_kind() == OpKind::NearBranch64 {
            for (name, offset) in &relative {
                text = crate::compiler::replace_token(&text, &format!("{offset:#x}"), name);
            }
        }
        let _ = writeln!(out, "  {at:#06x}  {text}");
    }
    out
}
