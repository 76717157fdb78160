//! The primitives compiled code does itself, in one table: which method (selector, the class
//! defining it, its arguments) each is, and what the tiers do with it. The VM marks codes
//! with what the optimizing tier's send does at run time (`Code::intrinsic`), the compile
//! request turns a site's cached receiver class into what the optimizing tier speculates
//! on (`ExpectedTarget`), and the lowering reads which marks a send of a selector can find.
//! The baseline tier's sends do none of them: it calls primitives through its send stub.

use crate::runtime::{Code, Runtime};

/// What the optimizing tier's send does in place of the call when its inline cache, probed
/// at run time, holds a code so marked (`Code::intrinsic`; its `u8` is what compiled code
/// reads).
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Intrinsic {
    None = 0,
    /// A block's `value…` with as many arguments as the block takes: its body called.
    BlockValue = 1,
    /// `Array>>at:`, `at:put:`, `length` on instances of Array itself.
    ArrayAt = 2,
    ArrayAtPut = 3,
    ArrayLength = 4,
    /// `String>>length` of an ASCII string (its byte length).
    StringLength = 5,
    /// `String>>=`, String's own primitive (the `string_equal` stub).
    StringEqual = 6,
    /// `Double>>sqrt`, Double's own primitive.
    DoubleSqrt = 7,
    /// `Class>>new`, Class's own primitive (the `ir_new_instance` stub).
    ClassNew = 8,
    /// `Array class>>new:`, Array's own primitive (the `ir_new_indexable` stub).
    ArrayNew = 9,
}

/// What the optimizing tier speculates on where a site's inline cache saw a receiver the
/// intrinsic applies to (`ExpectedTarget`, with the details the request fills in).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Speculated {
    ArrayAt,
    ArrayAtPut,
    ArrayLength,
    BlockValue,
    Identical,
    StringEqual,
    DoubleMath(super::DoubleFn),
    NewInstance,
    NewArray,
    StringLength,
}

/// The class defining an intrinsic's primitive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Holder {
    Object,
    Array,
    /// Array's metaclass (`Array class>>new:`).
    ArrayClass,
    String,
    Double,
    Class,
    /// Block or one of its classes by arity.
    Block,
}

/// The receivers a speculation applies to (the class the site's cache saw).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Receivers {
    /// Instances of the holder itself (not of subclasses, whose layout may differ).
    Holder,
    /// The block class of the send's arity.
    BlockOfArity,
    /// String and Symbol.
    Strings,
    /// Anything but a number: `==` compares an Integer and a Double by value and two
    /// Doubles by their bits, where compiled code compares words.
    NotNumber,
    /// Any receiver the method is found for.
    Any,
}

/// One primitive compiled code does itself.
struct Entry {
    selector: &'static str,
    holder: Holder,
    argc: u8,
    /// The optimizing tier's send, at run time.
    at_run_time: Intrinsic,
    /// The optimizing tier's speculation, at compile time, and the receivers it applies to.
    speculated: Option<(Speculated, Receivers)>,
}

const fn entry(
    selector: &'static str,
    holder: Holder,
    argc: u8,
    at_run_time: Intrinsic,
    speculated: Option<(Speculated, Receivers)>,
) -> Entry {
    Entry {
        selector,
        holder,
        argc,
        at_run_time,
        speculated,
    }
}

/// The table. Where two entries share a selector, the send tests them in this order.
const TABLE: &[Entry] = {
    use super::DoubleFn::{Cos, Sin, Sqrt};
    use Holder as H;
    use Intrinsic as I;
    use Receivers as R;
    use Speculated as S;
    &[
        entry(
            "at:",
            H::Array,
            1,
            I::ArrayAt,
            Some((S::ArrayAt, R::Holder)),
        ),
        entry(
            "at:put:",
            H::Array,
            2,
            I::ArrayAtPut,
            Some((S::ArrayAtPut, R::Holder)),
        ),
        entry(
            "length",
            H::Array,
            0,
            I::ArrayLength,
            Some((S::ArrayLength, R::Holder)),
        ),
        entry(
            "length",
            H::String,
            0,
            I::StringLength,
            Some((S::StringLength, R::Holder)),
        ),
        entry(
            "=",
            H::String,
            1,
            I::StringEqual,
            Some((S::StringEqual, R::Strings)),
        ),
        entry(
            "value",
            H::Block,
            0,
            I::BlockValue,
            Some((S::BlockValue, R::BlockOfArity)),
        ),
        entry(
            "value:",
            H::Block,
            1,
            I::BlockValue,
            Some((S::BlockValue, R::BlockOfArity)),
        ),
        entry(
            "value:with:",
            H::Block,
            2,
            I::BlockValue,
            Some((S::BlockValue, R::BlockOfArity)),
        ),
        entry(
            "value:with:with:",
            H::Block,
            3,
            I::BlockValue,
            Some((S::BlockValue, R::BlockOfArity)),
        ),
        entry(
            "==",
            H::Object,
            1,
            I::None,
            Some((S::Identical, R::NotNumber)),
        ),
        entry(
            "sqrt",
            H::Double,
            0,
            I::DoubleSqrt,
            Some((S::DoubleMath(Sqrt), R::Holder)),
        ),
        entry(
            "sin",
            H::Double,
            0,
            I::None,
            Some((S::DoubleMath(Sin), R::Holder)),
        ),
        entry(
            "cos",
            H::Double,
            0,
            I::None,
            Some((S::DoubleMath(Cos), R::Holder)),
        ),
        entry(
            "new",
            H::Class,
            0,
            I::ClassNew,
            Some((S::NewInstance, R::Any)),
        ),
        entry(
            "new:",
            H::ArrayClass,
            1,
            I::ArrayNew,
            Some((S::NewArray, R::Holder)),
        ),
    ]
};

impl Holder {
    /// Whether `class` is this holder in `rt`.
    fn is(self, rt: &Runtime, class: u32) -> bool {
        let core = &rt.core;
        match self {
            Holder::Object => class == core.object,
            Holder::Array => class == core.array,
            Holder::ArrayClass => class == rt.classes[core.array as usize].partner,
            Holder::String => class == core.string,
            Holder::Double => class == core.double,
            Holder::Class => class == core.class,
            Holder::Block => class == core.block || rt.block_classes.contains(&class),
        }
    }

    fn class(self, rt: &Runtime) -> u32 {
        let core = &rt.core;
        match self {
            Holder::Object => core.object,
            Holder::Array => core.array,
            Holder::ArrayClass => rt.classes[core.array as usize].partner,
            Holder::String => core.string,
            Holder::Double => core.double,
            Holder::Class => core.class,
            Holder::Block => core.block,
        }
    }
}

/// The entry of primitive `code`, if compiled code does it itself.
fn entry_of(rt: &Runtime, code: &Code) -> Option<&'static Entry> {
    code.primitive?;
    let selector = rt.symbols.name(code.selector);
    TABLE.iter().find(|e| {
        e.selector == selector && u16::from(e.argc) == code.num_args && e.holder.is(rt, code.holder)
    })
}

/// What the optimizing tier's send does where its cache finds `code` (`Code::intrinsic`).
pub(crate) fn at_run_time(rt: &Runtime, code: &Code) -> Intrinsic {
    entry_of(rt, code).map_or(Intrinsic::None, |e| e.at_run_time)
}

/// What the optimizing tier speculates on for receivers of `class` at a site whose cache
/// found primitive `code`, sent with `argc` arguments.
pub(crate) fn speculated(rt: &Runtime, class: u32, code: &Code, argc: usize) -> Option<Speculated> {
    let e = entry_of(rt, code)?;
    let (what, receivers) = e.speculated?;
    let applies = match receivers {
        Receivers::Holder => class == e.holder.class(rt),
        Receivers::BlockOfArity => rt.block_classes.get(argc) == Some(&class),
        Receivers::Strings => class == rt.core.string || class == rt.core.symbol,
        Receivers::NotNumber => class != rt.core.integer && class != rt.core.double,
        Receivers::Any => true,
    };
    (applies && usize::from(e.argc) == argc).then_some(what)
}

/// The marks a send of `selector` may find in its cache (`Code::intrinsic`), in the order
/// its code tests them.
pub fn marks_for(selector: &str) -> Vec<Intrinsic> {
    let mut out: Vec<Intrinsic> = Vec::new();
    for e in TABLE.iter().filter(|e| e.selector == selector) {
        if e.at_run_time != Intrinsic::None && !out.contains(&e.at_run_time) {
            out.push(e.at_run_time);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_selector_names_the_marks_its_sends_test_in_order() {
        assert_eq!(
            marks_for("length"),
            [Intrinsic::ArrayLength, Intrinsic::StringLength]
        );
        assert_eq!(marks_for("value:with:"), [Intrinsic::BlockValue]);
        assert!(marks_for("==").is_empty());
        assert!(marks_for("printString").is_empty());
    }
}
