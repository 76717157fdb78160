//! Heap shapes: classes, methods, arrays (with their named fields apart from the elements),
//! and the reflection check that a method runs only on instances of its holder.

use tally_heap::Value;

use crate::bytecode::CodeId;
use crate::objects::Kind;
use crate::runtime::ClassId;
use crate::{Vm, VmError};

/// An Array (or an instance of an Array subclass): where its elements start, after the
/// named fields of its class, and how many there are.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ArrayRef {
    pub(crate) obj: Value,
    pub(crate) base: usize,
    pub(crate) len: usize,
}

impl ArrayRef {
    pub(crate) fn get(self, i: usize) -> Value {
        self.obj.slot(self.base + i)
    }

    pub(crate) fn set(self, i: usize, v: Value) {
        self.obj.set_slot(self.base + i, v)
    }
}

/// The slots of an object that reflection (`instVarAt:`, `inspect`) may see: the named
/// fields of a plain object, an Array's fields and elements, a class's fields after its
/// hidden class id. Other shapes (blocks, methods, boxed numbers, strings, immediates) hold VM
/// data a SOM program must not read or overwrite, so they show none.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FieldsRef {
    pub(crate) obj: Value,
    first: usize,
    pub(crate) len: usize,
}

impl FieldsRef {
    pub(crate) fn get(self, i: usize) -> Value {
        self.obj.slot(self.first + i)
    }

    pub(crate) fn set(self, i: usize, v: Value) {
        self.obj.set_slot(self.first + i, v)
    }

    /// The field at `index` in the class's field list (which names every slot, hidden ones
    /// included), if it is a visible one.
    pub(crate) fn named(self, index: usize) -> Option<Value> {
        let i = index.checked_sub(self.first)?;
        (i < self.len).then(|| self.get(i))
    }
}

impl Vm {
    /// The visible fields of any value (none for immediates and VM-internal shapes).
    pub(crate) fn fields_ref(&self, v: Value) -> FieldsRef {
        let (first, len) = match Self::kind_of(v) {
            Some(Kind::Plain | Kind::Array) => (0, v.slot_count()),
            Some(Kind::Class) => (1, v.slot_count().saturating_sub(1)),
            _ => (0, 0),
        };
        FieldsRef { obj: v, first, len }
    }

    pub(super) fn kind_of(v: Value) -> Option<Kind> {
        v.is_ref().then(|| Kind::from_u8(v.kind()))
    }

    /// A class object's id.
    pub(crate) fn class_ref(&self, v: Value) -> Result<ClassId, VmError> {
        match Self::kind_of(v) {
            Some(Kind::Class) if v.slot_count() > 0 => Ok(v.slot(0).int_unchecked() as ClassId),
            _ => Err(self.wrong_kind("Class", v)),
        }
    }

    /// A Method or Primitive object's code.
    pub(crate) fn method_ref(&self, v: Value) -> Result<CodeId, VmError> {
        match Self::kind_of(v) {
            Some(Kind::Method) if v.slot_count() > 0 => Ok(v.slot(0).int_unchecked() as CodeId),
            _ => Err(self.wrong_kind("Method", v)),
        }
    }

    /// A Block closure's code.
    #[inline]
    pub(crate) fn block_ref(&self, v: Value) -> Result<CodeId, VmError> {
        match Self::kind_of(v) {
            Some(Kind::Block) if v.slot_count() == crate::objects::block::SLOTS => {
                Ok(v.slot(crate::objects::block::CODE).int_unchecked() as CodeId)
            }
            _ => Err(self.wrong_kind("Block", v)),
        }
    }

    /// An indexable object. Instances of Array subclasses keep their named fields in the
    /// first slots (where the compiled field accesses read them) and their elements after.
    pub(crate) fn array_ref(&self, v: Value) -> Result<ArrayRef, VmError> {
        if Self::kind_of(v) != Some(Kind::Array) {
            return Err(self.wrong_kind("Array", v));
        }
        let class = v.class_id();
        let base = if class == self.rt.core.array {
            0
        } else {
            self.rt.classes[class as usize].fields.len()
        };
        let len = v.slot_count().saturating_sub(base);
        Ok(ArrayRef { obj: v, base, len })
    }

    /// An Array of arguments, or nil for none (`invokeOn:with:`).
    pub(crate) fn arguments_ref(&self, v: Value) -> Result<Option<ArrayRef>, VmError> {
        if v == Value::NIL {
            return Ok(None);
        }
        self.array_ref(v).map(Some)
    }

    /// Whether `v` is an instance of `class` or of one of its subclasses.
    pub(crate) fn is_instance_of(&self, v: Value, class: ClassId) -> bool {
        let mut c = Some(self.rt.class_of(v));
        while let Some(k) = c {
            if k == class {
                return true;
            }
            c = self.rt.classes[k as usize].superclass;
        }
        false
    }

    /// What reflection must check before running `code` on a receiver with `argc` arguments
    /// (ordinary sends have both facts by construction): the arity, and that the receiver is
    /// an instance of the method's holder, so a primitive finds the layout it was written for.
    pub(crate) fn check_invocation(
        &self,
        code: CodeId,
        recv: Value,
        argc: usize,
    ) -> Result<(), VmError> {
        let c = self.rt.codes[code as usize];
        if c.num_args as usize != argc {
            return Err(self.error(format!(
                "Tried passing {argc} arguments to a function that requires {}.",
                c.num_args
            )));
        }
        if !self.is_instance_of(recv, c.holder) {
            return Err(self.error(format!(
                "{}>>#{} cannot run on {}: it is not an instance of {}",
                self.rt.class_name(c.holder),
                self.rt.symbols.name(c.selector),
                self.describe(recv),
                self.rt.class_name(c.holder),
            )));
        }
        Ok(())
    }

    #[cold]
    #[inline(never)]
    pub(super) fn wrong_kind(&self, expected: &str, v: Value) -> VmError {
        self.error(format!(
            "Expected object of type '{expected}' but got type '{}'.",
            self.type_name(v)
        ))
    }
}
