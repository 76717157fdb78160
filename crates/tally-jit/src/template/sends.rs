//! Sends: through the send routine and the stubs, and `isNil`/`notNil` in place.

use super::ops::{slot, FALSE, NIL, TRUE};
use super::{asm, Emitter};
use dynasmrt::{dynasm, DynasmApi, DynasmLabelApi};
use tally_vm::jit::Stub;

impl Emitter<'_> {
    /// A send through a status stub: the frame made exact to resume at `i + 1`.
    pub(super) fn send_stub(
        &mut self,
        stub: Stub,
        site: u32,
        h: i32,
        i: usize,
    ) -> Result<(), String> {
        self.op_label(i + 1)?;
        self.sync(h, i + 1);
        asm!(self; mov esi, site as i32);
        self.call_stub(stub);
        self.continue_or_leave(i + 1)
    }

    /// A send from `site` (receiver and arguments in the slots below `h`) through the send
    /// routine (`routines`: the inline cache, a direct call of compiled code with the
    /// callee's frame pushed, a trivial method in place, else the send stub), counting the
    /// receiver's class when the site has a value table. Resumes at `i + 1`.
    pub(super) fn direct_send(&mut self, site: u32, h: i32, i: usize) -> Result<(), String> {
        self.op_label(i + 1)?;
        let facts = self.site(site);
        let packed = super::routines::packed(h, facts.argc as i32, i + 1)?;
        self.mark_routine_call(i);
        asm!(self
            ; mov esi, site as i32
            ; mov rdx, QWORD packed
        );
        if facts.receiver_table != 0 {
            let (table, routine) = (facts.receiver_table as i64, self.routines.send_counting);
            asm!(self
                ; mov r8, QWORD table
                ; call extern routine
            );
        } else {
            let routine = self.routines.send;
            asm!(self; call extern routine);
        }
        let exit = self.exit;
        asm!(self
            ; test eax, eax
            ; jnz =>exit
        );
        self.go_to(i + 1)
    }

    /// `isNil` (`is_nil`) or `notNil` of the value on top of the `h` at instruction `i`:
    /// answered by a comparison with nil while the core library's definitions stand (as the
    /// interpreter does), else sent through the stub.
    pub(super) fn nil_test(
        &mut self,
        site: u32,
        is_nil: bool,
        h: i32,
        i: usize,
    ) -> Result<(), String> {
        self.op_label(i + 1)?;
        let c = &self.layout.calls;
        let (standard, redefined) = (c.nil_tests_standard, c.nil_tests_redefined);
        let slow = self.a.new_dynamic_label();
        let top = slot(h - 1);
        asm!(self
            ; cmp BYTE [rbx + standard], 0b1111
            ; jne =>slow
            ; cmp BYTE [rbx + redefined], 0
            ; jne =>slow
            ; mov eax, FALSE
            ; mov edx, TRUE
            ; cmp QWORD [r13 + top], NIL
        );
        if is_nil {
            asm!(self; cmove eax, edx);
        } else {
            asm!(self; cmovne eax, edx);
        }
        asm!(self; mov [r13 + top], rax);
        let stub = self.layout.stubs.send_nil_test;
        self.later(move |e| {
            asm!(e; =>slow);
            e.sync(h, i + 1);
            asm!(e
                ; mov esi, site as i32
                ; mov edx, is_nil as i32
            );
            e.call_stub(stub);
            e.continue_or_leave(i + 1)
                .expect("the next instruction was found above");
        });
        self.go_to(i + 1)
    }
}
