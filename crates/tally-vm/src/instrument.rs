//! Instrumented runs (vertical profiling, Buytaert's Javana): the VM reports its events and
//! every memory access of the program to a [`tally_vertical::Instrument`].
//!
//! An instrumented run interprets, in a dispatch loop of its own (`Dispatch::Instrumented`):
//! before each instruction the loop calls [`Vm::instrument_op`], which reports the frame
//! slots, fields and context slots the instruction is about to read or write, and the frames
//! entered and left since the last one (a shadow of the frame stack tells them apart, so
//! returns, non-local returns and errors need no hooks of their own). Array elements are
//! reported by the Array primitives, objects by `Vm::alloc`, classes and methods as they are
//! defined. The other loops carry none of this; outside the loop, each hook is one test of
//! `Vm::instrumentation`.
//!
//! A send reports the load of its receiver's header (its class). Operand-stack pushes and
//! pops are not reported: they are the interpreter's own traffic, which compiled code keeps in
//! registers; nor is what primitives read inside strings and numbers.

use tally_heap::object::HEADER_BYTES;
use tally_heap::Value;
use tally_vertical::event::{
    AccessKind, ClassId, Instrument, MemoryAccess, MethodId, NewObject, Place, Site,
};

use crate::bytecode::{CodeId, Op};
use crate::objects::context;
use crate::runtime::Code;
use crate::{Vm, VmError};

pub(crate) struct Instrumentation {
    tool: Box<dyn Instrument>,
    /// Frames entered and not yet left, as (depth, base pointer, code).
    shadow: Vec<(usize, usize, CodeId)>,
    /// Whether the last instruction was a (local) return: a frame it left was returned from,
    /// not unwound.
    last_was_return: bool,
    /// Classes and codes announced so far.
    classes: usize,
    codes: usize,
}

impl Vm {
    /// Makes this run an instrumented one, reporting to `tool` from now on (the classes and
    /// methods defined so far first). Interpreted only: call it before the program runs and
    /// without a code generator.
    pub fn instrument(&mut self, tool: Box<dyn Instrument>) -> Result<(), VmError> {
        if self.jit.is_on() {
            return Err(VmError::Fatal(
                "an instrumented run is interpreted; it cannot have a code generator".into(),
            ));
        }
        self.instrumentation = Some(Box::new(Instrumentation {
            tool,
            shadow: Vec::new(),
            last_was_return: false,
            classes: 0,
            codes: 0,
        }));
        self.dispatch = crate::profiling::Dispatch::Instrumented;
        self.instrument_announce();
        Ok(())
    }

    /// Ends the instrumented run: the frames still entered are reported left (unwound when
    /// the program failed), and the tool is answered.
    pub fn finish_instrument(&mut self, failed: bool) -> Option<Box<dyn Instrument>> {
        let mut i = self.instrumentation.take()?;
        while let Some((_, _, code)) = i.shadow.pop() {
            i.tool.method_exited(MethodId(code), failed);
        }
        Some(i.tool)
    }

    /// Reports the classes and methods defined since the last call.
    pub(crate) fn instrument_announce(&mut self) {
        let Some(i) = self.instrumentation.as_deref_mut() else {
            return;
        };
        for (id, _) in self.rt.classes.iter().enumerate().skip(i.classes) {
            let name = self.rt.class_name(id as u32);
            i.tool.class_loaded(ClassId(id as u32), &name);
        }
        i.classes = self.rt.classes.len();
        for code in &self.rt.codes[i.codes..] {
            let name = self.rt.code_name(code);
            let source = self.rt.source_path(code);
            i.tool.method_defined(MethodId(code.id), &name, &source);
        }
        i.codes = self.rt.codes.len();
    }

    /// The instrumented loop's hook, before instruction `ip` of `code` (frame base `bp`)
    /// runs: frames entered and left since the last one, then the instruction's accesses.
    #[inline(never)]
    pub(crate) fn instrument_op(&mut self, code: &'static Code, ip: usize, bp: usize, op: Op) {
        let Some(i) = self.instrumentation.as_deref_mut() else {
            return;
        };
        let depth = self.rt.frames.len();
        let mut left = 0;
        while let Some(&(d, b, c)) = i.shadow.last() {
            if d < depth || (d == depth && b == bp) {
                break;
            }
            i.shadow.pop();
            left += 1;
            let unwound = !(i.last_was_return && left == 1);
            i.tool.method_exited(MethodId(c), unwound);
        }
        if i.shadow.last().is_none_or(|&(d, _, _)| d < depth) {
            i.shadow.push((depth, bp, code.id));
            i.tool.method_entered(MethodId(code.id));
        }
        i.last_was_return = matches!(
            op,
            Op::Return | Op::ReturnSelf | Op::ReturnLocal(_) | Op::ReturnField(_)
        );
        let site = site_at(code, ip);
        let frame = |k: u16| (bp + k as usize, Place::FrameSlot);
        let (load, store) = (AccessKind::Load, AccessKind::Store);
        match op {
            Op::PushLocal(k)
            | Op::PopPushLocal(k)
            | Op::PushLocalSend(k, _)
            | Op::PushLocalSendBinary(k, _)
            | Op::ReturnLocal(k) => self.instrument_slot(frame(k), load, site),
            Op::StoreLocal(k) | Op::PopLocal(k) => self.instrument_slot(frame(k), store, site),
            Op::PushLocal2(a, b) => {
                self.instrument_slot(frame(a), load, site);
                self.instrument_slot(frame(b), load, site);
            }
            Op::ReturnSelf => self.instrument_slot(frame(0), load, site),
            Op::PushField(k) | Op::PopPushField(k) | Op::ReturnField(k) => {
                let recv = self.rt.stack[bp];
                self.instrument_object(recv, k as usize, Place::Field, load, site);
            }
            Op::StoreField(k) | Op::PopField(k) => {
                let recv = self.rt.stack[bp];
                self.instrument_object(recv, k as usize, Place::Field, store, site);
            }
            Op::PushCtx { level, index } => {
                let ctx = self.instrumented_context(level);
                self.instrument_object(ctx, index as usize, Place::ContextSlot, load, site);
            }
            Op::StoreCtx { level, index } | Op::PopCtx { level, index } => {
                let ctx = self.instrumented_context(level);
                self.instrument_object(ctx, index as usize, Place::ContextSlot, store, site);
            }
            _ => {}
        }
        // A send reads its receiver's header for the class (a small integer has none).
        let (site_id, pushes) = match op {
            Op::Send(s)
            | Op::SendBinary(s)
            | Op::SuperSend(s)
            | Op::SendIsNil(s)
            | Op::SendNotNil(s)
            | Op::SendCompareJumpIfFalse(s, _)
            | Op::SendCompareJumpIfTrue(s, _) => (s, 0),
            Op::PushLocalSend(_, s)
            | Op::PushLocalSendBinary(_, s)
            | Op::PushConstSendBinary(_, s) => (s, 1),
            _ => return,
        };
        let argc = self.rt.sites[site_id as usize].argc as usize;
        // The receiver's index once the fused push (if any) is done.
        let Some(at) = (self.rt.stack.len() + pushes).checked_sub(1 + argc) else {
            return;
        };
        let receiver = if at < self.rt.stack.len() {
            self.rt.stack[at]
        } else {
            match op {
                Op::PushLocalSend(k, _) | Op::PushLocalSendBinary(k, _) => {
                    self.rt.stack[bp + k as usize]
                }
                Op::PushConstSendBinary(v, _) => v,
                _ => return,
            }
        };
        if receiver.is_ref() {
            self.report_access(MemoryAccess {
                address: receiver.0,
                size: 8,
                kind: load,
                place: Place::Header,
                site,
                object: Some((receiver.0, ClassId(receiver.class_id()))),
            });
        }
    }

    fn instrumented_context(&self, level: u8) -> Value {
        let mut ctx = self.rt.frames.top().ctx;
        for _ in 0..level {
            ctx = ctx.slot(context::OUTER);
        }
        ctx
    }

    /// A frame slot (`(index into the value stack, place)`).
    fn instrument_slot(&mut self, (slot, place): (usize, Place), kind: AccessKind, site: Site) {
        let address = self.rt.stack.slot_address(slot);
        self.report_access(MemoryAccess {
            address,
            size: 8,
            kind,
            place,
            site,
            object: None,
        });
    }

    /// Slot `index` of `object` (nothing for an immediate or a slot it does not have: the
    /// instruction fails and says so).
    fn instrument_object(
        &mut self,
        object: Value,
        index: usize,
        place: Place,
        kind: AccessKind,
        site: Site,
    ) {
        if !object.is_ref() || index >= object.slot_count() {
            return;
        }
        self.report_access(MemoryAccess {
            address: object.0 + (HEADER_BYTES + 8 * index) as u64,
            size: 8,
            kind,
            place,
            site,
            object: Some((object.0, ClassId(object.class_id()))),
        });
    }

    fn report_access(&mut self, access: MemoryAccess) {
        if let Some(i) = self.instrumentation.as_deref_mut() {
            i.tool.access(&access);
        }
    }

    /// Where the top frame is: its code and the instruction it called from.
    fn instrument_site(&self) -> Site {
        match self.rt.frames.last() {
            Some(f) => self.frame_site(f),
            None => Site {
                method: MethodId::NONE,
                bci: 0,
                line: 0,
            },
        }
    }

    /// Where frame `f` is: its code and the instruction it called from.
    fn frame_site(&self, f: &crate::runtime::Frame) -> Site {
        site_at(
            self.rt.codes[f.code as usize],
            f.ip.saturating_sub(1) as usize,
        )
    }

    /// An Array primitive read or wrote slot `slot` of `array`.
    #[cold]
    pub(crate) fn instrument_element(&mut self, array: Value, slot: usize, kind: AccessKind) {
        let site = self.instrument_site();
        self.instrument_object(array, slot, Place::Element, kind, site);
    }

    /// `Vm::alloc` made `object`.
    #[cold]
    pub(crate) fn instrument_alloc(&mut self, object: Value) {
        let site = self.instrument_site();
        let live = self.rt.frames.live();
        let caller = live.len().checked_sub(2).map(|k| self.frame_site(&live[k]));
        if let Some(i) = self.instrumentation.as_deref_mut() {
            let size = tally_heap::object::object_size(object.slot_count(), object.byte_len())
                .unwrap_or(0) as u32;
            i.tool.object_created(&NewObject {
                address: object.0,
                class: ClassId(object.class_id()),
                size,
                site,
                caller,
            });
        }
    }
}

/// Instruction `bci` of `code` as a site, with its source line.
fn site_at(code: &Code, bci: usize) -> Site {
    Site {
        method: MethodId(code.id),
        bci: bci as u32,
        line: code
            .positions
            .get(bci)
            .map(|p| p.0)
            .unwrap_or(code.source_line),
    }
}
