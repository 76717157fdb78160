//! The baseline tier as a template compiler (x86-64): each bytecode becomes a fixed
//! sequence of machine instructions over the interpreter's frame and value stack, written
//! by dynasm (whose macros turn each template into byte pushes at build time), with no IR,
//! no register allocation and no optimization, as Jikes RVM's baseline compiler, V8's
//! Sparkplug and Cog's Cogit work. What it makes does what the interpreter does, in the
//! same frame: locals, fields, constants, jumps and small-integer and immediate-double
//! arithmetic and comparisons in place; sends through the inline cache to compiled code
//! (pushing the callee's frame), trivial methods in place, everything else through the
//! VM's stubs; rare instructions and every error path hand the frame to the interpreter.
//! Nothing is speculated and nothing deoptimizes.
//!
//! Register use, the same in every template:
//! - `rbx` the `*mut Vm`, `r12` the frame's record, `r13` the address of its first value
//!   stack slot (the receiver), `r14` its base index in the value stack; callee-saved, set
//!   at entry, never changed (the frame array and the value stack do not move while an
//!   activation runs).
//! - `r15` a callee-saved scratch a template keeps across one call.
//! - everything else caller-saved scratch, dead at every instruction boundary.
//!
//! Invariant: no heap reference is held in a register across a stub call or a direct call.
//! Every value is in its value-stack slot (`r13` plus the instruction's static stack height),
//! loaded where it is used, so the collector finds and updates it there, and the code needs
//! no stack maps.
//!
//! Layout: a prologue, the instructions in order (each one's hot path), then their cold
//! paths (slow sends, stub calls, hand-overs), the shared exit, and a table from bytecode
//! index to instruction, through which an activation resumes at the `ip` its frame holds.

mod arena;
mod arith;
mod listing;
mod ops;
mod routines;
mod sends;

use arena::CodeArena;
use routines::Routines;

use dynasmrt::x64::X64Relocation;
use dynasmrt::{dynasm, DynamicLabel, DynasmApi, DynasmLabelApi, VecAssembler};
use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use tally_vm::bytecode::stack_heights;
use tally_vm::jit::{CompileRequest, Layout, SharedCode, SiteFacts, Status, Stub};
use tally_vm::runtime::{HOOK_AT_ENTRY, HOOK_AT_EXIT};

/// The baseline tier's column in per-tier counts (`tally_profile::Tier::column`).
const TIER_COLUMN: usize = 1;

/// Assembles a template in `$e`'s buffer.
macro_rules! asm {
    ($e:expr; $($t:tt)*) => {
        dynasm!($e.a ; .arch x64 ; $($t)*)
    };
}
pub(crate) use asm;

/// The assembler templates and routines are written with.
pub(crate) type Asm = VecAssembler<X64Relocation>;

/// What assembling one code made.
pub(crate) struct Assembled {
    /// The function's bytes, position-independent: every jump within it is relative, every
    /// address outside it a 64-bit constant.
    pub bytes: Vec<u8>,
    /// `(offset, bytecode index)` runs, sorted, as `NativeCode::pc_map` takes them.
    pub pc_map: Vec<(u32, Option<u32>)>,
    /// Where the resume table starts: the bytes before it are instructions.
    pub table_at: usize,
}

/// A cold path, written after every instruction's hot path: the bytecode it serves and
/// what writes it.
type ColdPath<'a> = (Option<u32>, Box<dyn FnOnce(&mut Emitter<'a>) + 'a>);

/// The state of one compile.
pub(crate) struct Emitter<'a> {
    a: Asm,
    layout: &'a Layout,
    request: &'a CompileRequest,
    routines: &'a Routines,
    /// Each instruction's first byte.
    ops: Vec<DynamicLabel>,
    /// Leaves the function answering the status in `eax`.
    exit: DynamicLabel,
    /// The resume table.
    table: DynamicLabel,
    /// The instruction being written (its hot path), for fall-through to the next.
    current: usize,
    /// Where each run of machine code starts and the bytecode it serves.
    marks: Vec<(u32, Option<u32>)>,
    cold: Vec<ColdPath<'a>>,
    /// The hand-over to the interpreter at (instruction, height), one per pair.
    handovers: HashMap<(usize, i32), DynamicLabel>,
}

/// Assembles `request`'s code for address `base`, calling `routines`.
fn assemble(
    request: &CompileRequest,
    layout: &Layout,
    routines: &Routines,
    base: usize,
) -> Result<Assembled, String> {
    let code = request.code;
    if code.ops.is_empty() {
        return Err("no bytecode".into());
    }
    let heights = heights_of(request)?;
    let mut a = VecAssembler::new(base);
    // Templates run to a few dozen bytes per instruction; one allocation for most codes.
    a.reserve_ops(64 + code.ops.len() * 48);
    let ops = (0..code.ops.len()).map(|_| a.new_dynamic_label()).collect();
    let exit = a.new_dynamic_label();
    let table = a.new_dynamic_label();
    let mut e = Emitter {
        a,
        layout,
        request,
        routines,
        ops,
        exit,
        table,
        current: 0,
        marks: Vec::new(),
        cold: Vec::new(),
        handovers: HashMap::new(),
    };
    e.prologue();
    for (i, &op) in code.ops.iter().enumerate() {
        e.current = i;
        e.mark(Some(i as u32));
        let label = e.ops[i];
        asm!(e; =>label);
        match heights[i] {
            Some(h) => e.op(i, op, h as i32)?,
            None => e.leave(Status::Interpret),
        }
    }
    e.current = usize::MAX;
    while !e.cold.is_empty() {
        for (bci, write) in std::mem::take(&mut e.cold) {
            e.mark(bci);
            write(&mut e);
        }
    }
    e.epilogue();
    e.resume_table()
}

/// The stack height before each instruction of `request`'s code (`None`: unreachable),
/// once every site it sends from is known to be in the request.
fn heights_of(request: &CompileRequest) -> Result<Vec<Option<u32>>, String> {
    let code = request.code;
    for op in &code.ops {
        if let Some(site) = op.site() {
            request.site(site)?;
        }
    }
    let start = 1 + code.num_args as usize + code.num_locals as usize;
    let (heights, _) = stack_heights(&code.ops, start, |s| {
        request.site(s).map_or(0, |f| f.argc as usize)
    })?;
    Ok(heights)
}

impl<'a> Emitter<'a> {
    fn offset(&self) -> u32 {
        self.a.offset().0 as u32
    }

    /// Starts a run of code serving bytecode `bci` (`None`: no one bytecode).
    fn mark(&mut self, bci: Option<u32>) {
        let at = self.offset();
        self.marks.push((at, bci));
    }

    /// Queues a cold path serving the instruction being written.
    fn later(&mut self, write: impl FnOnce(&mut Emitter<'a>) + 'a) {
        let bci = (self.current != usize::MAX).then_some(self.current as u32);
        self.cold.push((bci, Box::new(write)));
    }

    fn site(&self, site: u32) -> SiteFacts {
        self.request
            .site(site)
            .expect("every site was checked before assembly")
    }

    /// Instruction `at`'s label, or an error for a jump out of the code.
    fn op_label(&self, at: usize) -> Result<DynamicLabel, String> {
        self.ops
            .get(at)
            .copied()
            .ok_or_else(|| format!("a jump to {at} leaves the code"))
    }

    /// Goes on at instruction `at`: nothing when that is the next one and this is the end of
    /// the current instruction's hot path.
    fn go_to(&mut self, at: usize) -> Result<(), String> {
        if self.current != usize::MAX && at == self.current + 1 {
            if at >= self.ops.len() {
                return Err("execution runs off the end".into());
            }
            return Ok(());
        }
        let label = self.op_label(at)?;
        asm!(self; jmp =>label);
        Ok(())
    }

    /// Jumps to instruction `at` from anywhere (a cold path, the middle of a template).
    fn jump_to(&mut self, at: usize) -> Result<(), String> {
        let label = self.op_label(at)?;
        asm!(self; jmp =>label);
        Ok(())
    }

    /// `push rbp` .. `sub rsp, 8`: five callee-saved registers below the frame pointer, the
    /// stack 16-byte aligned for calls. Then the fresh activation's registers from the
    /// arguments `(vm, frame, bp, resume)`, or the resumed one's from the top frame.
    fn prologue(&mut self) {
        self.mark(None);
        let l = self.layout;
        let (stack_base, frame_stack, frames_len, frames_base) =
            (l.stack_base, l.frame_stack, l.frames_len, l.frames_base);
        let (frame_size, frame_ip, frame_bp) = (l.frame_size, l.frame_ip, l.frame_bp);
        let resume = self.a.new_dynamic_label();
        asm!(self
            ; push rbp
            ; mov rbp, rsp
            ; push rbx
            ; push r12
            ; push r13
            ; push r14
            ; push r15
            ; sub rsp, 8
            ; mov rbx, rdi
            ; test ecx, ecx
            ; jnz =>resume
            ; mov r12, rsi
            ; mov r14, rdx
            ; mov r13, [rbx + stack_base]
            ; lea r13, [r13 + r14 * 8]
        );
        let code = self.request.code;
        if l.count_calls {
            // A direct call from compiled code: `--count-calls` counts it as a call of this
            // code in this tier (calls through the dispatcher are counted where the
            // interpreter sets up the frame).
            self.increment(tally_vm::jit::TierCallCounter::offset_in_code(TIER_COLUMN));
        }
        if code.hooks.load(Relaxed) & HOOK_AT_ENTRY != 0 {
            self.method_hook_point(0);
        }
        let first = self.ops[0];
        asm!(self; jmp =>first);
        let n = self.ops.len() as i32;
        let (exit, table) = (self.exit, self.table);
        asm!(self
            ; =>resume
            ; mov rax, [rbx + frame_stack]
            ; mov rcx, [rax + frames_len]
            ; mov rdx, [rax + frames_base]
            ; dec rcx
            ; imul rcx, rcx, frame_size
            ; lea r12, [rdx + rcx]
            ; mov r14d, DWORD [r12 + frame_bp]
            ; mov r13, [rbx + stack_base]
            ; lea r13, [r13 + r14 * 8]
            ; mov ecx, DWORD [r12 + frame_ip]
            ; cmp ecx, n
            ; jae >bad_ip
            ; lea rax, [=>table]
            ; movsxd rdx, DWORD [rax + rcx * 4]
            ; add rax, rdx
            ; jmp rax
            // An `ip` no instruction serves (never saved by this code): the interpreter
            // takes the frame.
            ; bad_ip:
            ; mov eax, Status::Interpret as i32
            ; jmp =>exit
        );
    }

    /// The shared exit: restores the callee-saved registers and answers `eax`.
    fn epilogue(&mut self) {
        self.mark(None);
        let exit = self.exit;
        asm!(self
            ; =>exit
            ; add rsp, 8
            ; pop r15
            ; pop r14
            ; pop r13
            ; pop r12
            ; pop rbx
            ; pop rbp
            ; ret
        );
    }

    /// The resume table (each instruction's offset from the table, an i32) after the code,
    /// then the finished bytes and pc map.
    fn resume_table(mut self) -> Result<Assembled, String> {
        self.a.align(4, 0xcc);
        let table = self.table;
        asm!(self; =>table);
        let table_at = self.a.offset().0;
        self.a.extend(std::iter::repeat_n(0u8, 4 * self.ops.len()));
        self.a.commit().map_err(|e| format!("assembling: {e}"))?;
        let mut entries = Vec::with_capacity(self.ops.len());
        for &label in &self.ops {
            let at = self
                .a
                .labels()
                .resolve_dynamic(label)
                .map_err(|e| format!("assembling: {e}"))?;
            entries.push((at.0 as i64 - table_at as i64) as i32);
        }
        let mut bytes = self.a.take().map_err(|e| format!("assembling: {e}"))?;
        for (k, offset) in entries.into_iter().enumerate() {
            bytes[table_at + 4 * k..table_at + 4 * k + 4].copy_from_slice(&offset.to_le_bytes());
        }
        let mut marks = self.marks;
        marks.push((table_at as u32, None));
        let pc_map = pc_map_of(marks, bytes.len() as u32);
        Ok(Assembled {
            bytes,
            pc_map,
            table_at,
        })
    }

    /// Adds one to the u64 at `offset` in the code being compiled (only the VM thread writes
    /// it; codes live as long as the VM, so the address is a constant).
    fn increment(&mut self, offset: i32) {
        let address = self.request.code as *const _ as i64 + i64::from(offset);
        asm!(self
            ; mov rax, QWORD address
            ; add QWORD [rax], 1
        );
    }

    /// Makes the VM's view exact before a stub or an exit: the stack height (`h` values
    /// above the frame's base) and the frame's `ip`. Uses `r11`.
    fn sync(&mut self, h: i32, ip: usize) {
        let (stack_len, frame_ip) = (self.layout.stack_len, self.layout.frame_ip);
        let ip = ip as i32;
        asm!(self
            ; lea r11, [r14 + h]
            ; mov [rbx + stack_len], r11
            ; mov DWORD [r12 + frame_ip], ip
        );
    }

    /// Stores instruction `i` as the frame's `ip` before a call of a send or binary routine,
    /// so that a sample taken in the routine (a native frame the VM never sees) lands on the
    /// instruction that called it; the routine makes the frame exact itself where it looks
    /// further (a stub, a call).
    fn mark_routine_call(&mut self, i: usize) {
        let frame_ip = self.layout.frame_ip;
        asm!(self; mov DWORD [r12 + frame_ip], i as i32);
    }

    /// Calls `stub` with the VM and the arguments already in `esi`/`rsi`, `edx`/`rdx`, ...
    /// (through its trampoline, which passes the VM).
    fn call_stub(&mut self, stub: Stub) {
        let trampoline = self.routines.stub(stub);
        asm!(self; call extern trampoline);
    }

    /// Leaves the function answering `status`.
    fn leave(&mut self, status: Status) {
        let exit = self.exit;
        let status = status as i32;
        asm!(self
            ; mov eax, status
            ; jmp =>exit
        );
    }

    /// After a stub that answers a status in `eax`: on to instruction `next` on `Continue`,
    /// else leave with it.
    fn continue_or_leave(&mut self, next: usize) -> Result<(), String> {
        let exit = self.exit;
        asm!(self
            ; test eax, eax
            ; jnz =>exit
        );
        self.go_to(next)
    }

    /// The label of a cold path that hands the frame to the interpreter at instruction `at`
    /// with `h` values on the stack (error paths and rare cases: the interpreter redoes the
    /// instruction and reports what went wrong).
    fn handover(&mut self, at: usize, h: i32) -> DynamicLabel {
        if let Some(&label) = self.handovers.get(&(at, h)) {
            return label;
        }
        let label = self.a.new_dynamic_label();
        self.handovers.insert((at, h), label);
        self.cold.push((
            Some(at as u32),
            Box::new(move |e: &mut Emitter| {
                let routine = e.routines.handover;
                asm!(e
                    ; =>label
                    ; mov edx, h
                    ; mov ecx, at as i32
                    ; jmp extern routine
                );
            }),
        ));
        label
    }

    /// A method-hook point (`kind` 0: entry, 1: before the return; GC hints, phases): when
    /// `method_hooks_armed` is set, calls the `method_hook` stub (which may collect:
    /// everything is in the frame by then), then goes on, or leaves with the stub's status if
    /// it failed.
    fn method_hook_point(&mut self, kind: i32) {
        let armed = self.layout.method_hooks_armed as i64;
        let hook = self.a.new_dynamic_label();
        let back = self.a.new_dynamic_label();
        asm!(self
            ; mov rax, QWORD armed
            ; cmp BYTE [rax], 0
            ; jne =>hook
            ; =>back
        );
        let stub = self.layout.stubs.method_hook;
        self.later(move |e| {
            let exit = e.exit;
            asm!(e
                ; =>hook
                ; mov esi, kind
            );
            e.call_stub(stub);
            asm!(e
                ; test eax, eax
                ; jnz =>exit
                ; jmp =>back
            );
        });
    }

    /// Returns the value on top of the `h` values on the stack at instruction `i`: the
    /// function answers `Returned`.
    fn return_top(&mut self, h: i32, i: usize) {
        self.sync(h, i + 1);
        if self.request.code.hooks.load(Relaxed) & HOOK_AT_EXIT != 0 {
            self.method_hook_point(1);
        }
        self.leave(Status::Returned);
    }
}

/// The pc map from the marks (each run's start and bytecode, in the order written, which is
/// the order of offsets): empty runs dropped, neighbours of one bytecode merged.
fn pc_map_of(marks: Vec<(u32, Option<u32>)>, size: u32) -> Vec<(u32, Option<u32>)> {
    let mut map: Vec<(u32, Option<u32>)> = Vec::with_capacity(marks.len() + 1);
    for (at, bci) in marks {
        if let Some(last) = map.last_mut() {
            if last.0 == at {
                *last = (at, bci);
                continue;
            }
        }
        map.push((at, bci));
    }
    map.push((size, None));
    map.dedup_by(|later, earlier| later.1 == earlier.1);
    map
}

/// A function placed in executable memory: its first byte (the entry point), its size
/// (the resume table included) and pc map, and the shared routines placed with it (the
/// first compile's).
pub(crate) struct Placed {
    pub start: usize,
    pub size: usize,
    pub pc_map: Vec<(u32, Option<u32>)>,
    pub shared: Vec<SharedCode>,
}

/// The template compiler: the code region, and the routines at its start once the first
/// compile has made them.
pub(crate) struct TemplateCompiler {
    placed: Option<(CodeArena, Routines)>,
    /// The routines, not yet reported with a compile.
    unreported: Vec<SharedCode>,
}

impl TemplateCompiler {
    pub(crate) fn new() -> TemplateCompiler {
        TemplateCompiler {
            placed: None,
            unreported: Vec::new(),
        }
    }

    /// The region and the routines, made at the first use.
    fn region(&mut self, layout: &Layout) -> Result<&mut (CodeArena, Routines), String> {
        if self.placed.is_none() {
            let mut arena = CodeArena::new()?;
            let at = arena.next_address();
            let (bytes, routines) = routines::write(layout, at)?;
            arena.place(at, &bytes)?;
            self.unreported = routines.named.clone();
            self.placed = Some((arena, routines));
        }
        Ok(self.placed.as_mut().expect("made above"))
    }

    /// Assembles and places `request`'s code.
    pub(crate) fn compile(
        &mut self,
        request: &CompileRequest,
        layout: &Layout,
    ) -> Result<Placed, String> {
        let (arena, routines) = self.region(layout)?;
        let start = arena.next_address();
        let Assembled { bytes, pc_map, .. } = assemble(request, layout, routines, start)?;
        arena.place(start, &bytes)?;
        Ok(Placed {
            start,
            size: bytes.len(),
            pc_map,
            shared: std::mem::take(&mut self.unreported),
        })
    }

    /// `tally disasm`'s listing of `request`'s code: machine instructions by bytecode, the
    /// addresses in `names` and the routines' by name.
    pub(crate) fn listing(
        &mut self,
        request: &CompileRequest,
        layout: &Layout,
        names: &[(String, usize)],
    ) -> Result<String, String> {
        let (arena, routines) = self.region(layout)?;
        let base = arena.next_address();
        let assembled = assemble(request, layout, routines, base)?;
        let mut names = names.to_vec();
        names.extend(routines.named.iter().map(|r| (r.name.clone(), r.start)));
        Ok(listing::listing(&assembled, base, &names))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pc_map_merges_runs_of_one_bytecode_and_drops_empty_ones() {
        let marks = vec![
            (0, None),
            (10, Some(0)),
            (20, Some(1)),
            (20, Some(2)),
            (30, Some(2)),
            (40, None),
        ];
        assert_eq!(
            pc_map_of(marks, 50),
            vec![(0, None), (10, Some(0)), (20, Some(2)), (40, None)]
        );
    }
}
