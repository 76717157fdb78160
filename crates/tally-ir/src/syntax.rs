//! How instructions are written as text and read back, from one template per instruction
//! (its declaration's, [`crate::inst`]): the printer and the parser follow the same
//! template, so what one writes the other reads.
//!
//! A template is text with placeholders:
//! - `{field}`: the field in its type's own syntax ([`Field`]);
//! - `{field:kind}`: a number read as a `code` (its name), a `site` (its selector), a
//!   `class` (`class7`), or a `double` (a double's bits, written as the double);
//! - `{field?yes|no}`: a flag, written `yes` when set and `no` when not;
//! - `[…]`: a group left out when every field in it holds its default (an `Option` none, a
//!   list empty, a flag clear, or the default the declaration gives the field); a group left
//!   out gives its fields their defaults when read.

use tally_heap::Value;
use tally_vm::jit::{DeoptReason, DoubleFn, PlainShape};

use crate::print::Names;
use crate::{FloatOp, IntCmp, IntOp, ValueId};

/// Codes and send sites by name, both ways: what listings print, and what the parser reads
/// back. A name it does not know is written `code3` or `site3`, which it always reads.
#[derive(Clone, Debug, Default)]
pub struct NameTable {
    codes: Vec<(u32, String)>,
    sites: Vec<(u32, String)>,
}

impl NameTable {
    pub fn add_code(&mut self, id: u32, name: impl Into<String>) {
        self.codes.push((id, name.into()));
    }

    pub fn add_site(&mut self, id: u32, name: impl Into<String>) {
        self.sites.push((id, name.into()));
    }

    pub fn code_named(&self, name: &str) -> Option<u32> {
        lookup(&self.codes, name).or_else(|| numbered(name, "code"))
    }

    /// The code whose name starts `input`, the longest such, and that name's length.
    fn code_at(&self, input: &str) -> Option<(u32, usize)> {
        longest_at(&self.codes, input).or_else(|| number_at(input, "code"))
    }

    fn site_at(&self, input: &str) -> Option<(u32, usize)> {
        longest_at(&self.sites, input).or_else(|| number_at(input, "site"))
    }
}

impl Names for NameTable {
    fn code(&self, id: u32) -> String {
        self.codes
            .iter()
            .find(|(c, _)| *c == id)
            .map_or_else(|| format!("code{id}"), |(_, n)| n.clone())
    }

    fn site(&self, site: u32) -> String {
        self.sites
            .iter()
            .find(|(s, _)| *s == site)
            .map_or_else(|| format!("site{site}"), |(_, n)| n.clone())
    }
}

fn lookup(names: &[(u32, String)], name: &str) -> Option<u32> {
    names.iter().find(|(_, n)| n == name).map(|(id, _)| *id)
}

fn numbered(name: &str, prefix: &str) -> Option<u32> {
    name.strip_prefix(prefix)?.parse().ok()
}

fn longest_at(names: &[(u32, String)], input: &str) -> Option<(u32, usize)> {
    names
        .iter()
        .filter(|(_, n)| input.starts_with(n.as_str()))
        .max_by_key(|(_, n)| n.len())
        .map(|(id, n)| (*id, n.len()))
}

fn number_at(input: &str, prefix: &str) -> Option<(u32, usize)> {
    let rest = input.strip_prefix(prefix)?;
    let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let id = rest[..digits].parse().ok()?;
    Some((id, prefix.len() + digits))
}

/// One piece of a template.
#[derive(Debug)]
enum Piece<'t> {
    Text(&'t str),
    Field {
        name: &'t str,
        kind: Option<&'t str>,
    },
    Group(Vec<Piece<'t>>),
}

fn pieces(template: &str) -> Vec<Piece<'_>> {
    let (pieces, rest) = pieces_until(template, None);
    debug_assert!(rest.is_empty(), "an unbalanced template: {template}");
    pieces
}

/// The pieces up to `end` (a group's `]`), and what follows it.
fn pieces_until(mut t: &str, end: Option<char>) -> (Vec<Piece<'_>>, &str) {
    let mut out = Vec::new();
    while let Some(c) = t.chars().next() {
        if Some(c) == end {
            return (out, &t[1..]);
        }
        match c {
            '{' => {
                let close = t.find('}').expect("a closed placeholder");
                let inner = &t[1..close];
                let (name, kind) = match inner.find([':', '?']) {
                    Some(k) if inner.as_bytes()[k] == b':' => (&inner[..k], Some(&inner[k + 1..])),
                    Some(k) => (&inner[..k], Some(&inner[k..])),
                    None => (inner, None),
                };
                out.push(Piece::Field { name, kind });
                t = &t[close + 1..];
            }
            '[' => {
                let (group, rest) = pieces_until(&t[1..], Some(']'));
                out.push(Piece::Group(group));
                t = rest;
            }
            _ => {
                let stop = t.find(['{', '[', ']']).unwrap_or(t.len());
                out.push(Piece::Text(&t[..stop]));
                t = &t[stop..];
            }
        }
    }
    (out, t)
}

fn field_names<'t>(pieces: &[Piece<'t>], out: &mut Vec<&'t str>) {
    for p in pieces {
        match p {
            Piece::Text(_) => {}
            Piece::Field { name, .. } => out.push(name),
            Piece::Group(g) => field_names(g, out),
        }
    }
}

/// Writes an instruction by its template: `field` writes the named field (in a kind),
/// `is_default` tells whether it holds its default.
pub(crate) fn write(
    template: &str,
    out: &mut String,
    field: &mut dyn FnMut(&str, Option<&str>, &mut String),
    is_default: &dyn Fn(&str) -> bool,
) {
    write_pieces(&pieces(template), out, field, is_default);
}

fn write_pieces(
    pieces: &[Piece],
    out: &mut String,
    field: &mut dyn FnMut(&str, Option<&str>, &mut String),
    is_default: &dyn Fn(&str) -> bool,
) {
    for p in pieces {
        match p {
            Piece::Text(t) => out.push_str(t),
            Piece::Field { name, kind } => field(name, *kind, out),
            Piece::Group(g) => {
                let mut names = Vec::new();
                field_names(g, &mut names);
                if !names.iter().all(|n| is_default(n)) {
                    write_pieces(g, out, field, is_default);
                }
            }
        }
    }
}

/// What the parser asks of an instruction's fields.
pub(crate) enum Slot<'a, 'i> {
    /// Read the named field (in a kind) from the input, advancing it.
    Read(&'a str, Option<&'a str>, &'a mut &'i str),
    /// Forget what was read into the named field (a group that did not match).
    Reset(&'a str),
}

/// Reads `text` (all of it) by `template`, each field through `slot`.
pub(crate) fn read(
    template: &str,
    text: &str,
    slot: &mut dyn FnMut(Slot) -> Result<(), String>,
) -> Result<(), String> {
    let mut input = text;
    read_pieces(&pieces(template), &mut input, slot)?;
    if input.trim().is_empty() {
        Ok(())
    } else {
        Err(format!("`{}` left over", input.trim()))
    }
}

fn read_pieces(
    pieces: &[Piece],
    input: &mut &str,
    slot: &mut dyn FnMut(Slot) -> Result<(), String>,
) -> Result<(), String> {
    for p in pieces {
        match p {
            Piece::Text(t) => {
                *input = input
                    .strip_prefix(t)
                    .ok_or_else(|| format!("expected `{t}` at `{input}`"))?;
            }
            Piece::Field { name, kind } => slot(Slot::Read(name, *kind, input))?,
            Piece::Group(g) => {
                let before = *input;
                if read_pieces(g, input, slot).is_err() {
                    *input = before;
                    let mut names = Vec::new();
                    field_names(g, &mut names);
                    for n in names {
                        slot(Slot::Reset(n))?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// A field of an instruction: the values it reads (if any), and its text.
pub(crate) trait Field: Sized + PartialEq {
    /// Appends the values it reads, in order.
    fn operands(&self, _out: &mut Vec<ValueId>) {}

    fn map_operands(&mut self, _f: &mut impl FnMut(ValueId) -> ValueId) {}

    fn write(&self, kind: Option<&str>, names: &dyn Names, out: &mut String);

    fn read(kind: Option<&str>, input: &mut &str, names: &NameTable) -> Result<Self, String>;

    /// What it holds when a template's group leaves it out, if it may be left out.
    fn absent() -> Option<Self> {
        None
    }
}

/// Takes `len` bytes of `input`.
fn take<'i>(input: &mut &'i str, len: usize) -> &'i str {
    let (head, rest) = input.split_at(len);
    *input = rest;
    head
}

/// The run of characters at the start of `input` that `keep` accepts.
fn span<'i>(input: &mut &'i str, keep: impl Fn(char) -> bool) -> &'i str {
    let len = input.len() - input.trim_start_matches(keep).len();
    take(input, len)
}

fn digits<T: std::str::FromStr>(input: &mut &str) -> Result<T, String> {
    let at = *input;
    span(input, |c| c.is_ascii_digit())
        .parse()
        .map_err(|_| format!("expected a number at `{at}`"))
}

fn word<'i>(input: &mut &'i str) -> &'i str {
    span(input, |c| c.is_ascii_alphanumeric() || c == '_')
}

impl Field for ValueId {
    fn operands(&self, out: &mut Vec<ValueId>) {
        out.push(*self);
    }

    fn map_operands(&mut self, f: &mut impl FnMut(ValueId) -> ValueId) {
        *self = f(*self);
    }

    fn write(&self, _: Option<&str>, _: &dyn Names, out: &mut String) {
        out.push_str(&self.to_string());
    }

    fn read(_: Option<&str>, input: &mut &str, _: &NameTable) -> Result<Self, String> {
        let at = *input;
        *input = input
            .strip_prefix('v')
            .ok_or_else(|| format!("expected a value at `{at}`"))?;
        Ok(ValueId(digits(input)?))
    }
}

impl Field for Option<ValueId> {
    fn operands(&self, out: &mut Vec<ValueId>) {
        out.extend(self);
    }

    fn map_operands(&mut self, f: &mut impl FnMut(ValueId) -> ValueId) {
        if let Some(v) = self {
            *v = f(*v);
        }
    }

    fn write(&self, kind: Option<&str>, names: &dyn Names, out: &mut String) {
        if let Some(v) = self {
            v.write(kind, names, out);
        }
    }

    fn read(kind: Option<&str>, input: &mut &str, names: &NameTable) -> Result<Self, String> {
        ValueId::read(kind, input, names).map(Some)
    }

    fn absent() -> Option<Self> {
        Some(None)
    }
}

impl Field for Vec<ValueId> {
    fn operands(&self, out: &mut Vec<ValueId>) {
        out.extend(self);
    }

    fn map_operands(&mut self, f: &mut impl FnMut(ValueId) -> ValueId) {
        self.iter_mut().for_each(|v| *v = f(*v));
    }

    fn write(&self, _: Option<&str>, _: &dyn Names, out: &mut String) {
        let texts: Vec<String> = self.iter().map(|v| v.to_string()).collect();
        out.push_str(&texts.join(", "));
    }

    /// Values separated by `, `, as many as there are (none too).
    fn read(kind: Option<&str>, input: &mut &str, names: &NameTable) -> Result<Self, String> {
        let mut out = Vec::new();
        let starts_value = |s: &str| {
            s.strip_prefix('v')
                .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
        };
        if !starts_value(input) {
            return Ok(out);
        }
        out.push(ValueId::read(kind, input, names)?);
        while let Some(rest) = input.strip_prefix(", ").filter(|r| starts_value(r)) {
            *input = rest;
            out.push(ValueId::read(kind, input, names)?);
        }
        Ok(out)
    }

    fn absent() -> Option<Self> {
        Some(Vec::new())
    }
}

impl Field for u16 {
    fn write(&self, _: Option<&str>, _: &dyn Names, out: &mut String) {
        out.push_str(&self.to_string());
    }

    fn read(_: Option<&str>, input: &mut &str, _: &NameTable) -> Result<Self, String> {
        digits(input)
    }
}

/// A number, a code (`code`: its name), a send site (`site`: its selector) or a class
/// (`class`: `class7`).
impl Field for u32 {
    fn write(&self, kind: Option<&str>, names: &dyn Names, out: &mut String) {
        match kind {
            Some("code") => out.push_str(&names.code(*self)),
            Some("site") => out.push_str(&names.site(*self)),
            Some("class") => out.push_str(&format!("class{self}")),
            _ => out.push_str(&self.to_string()),
        }
    }

    fn read(kind: Option<&str>, input: &mut &str, names: &NameTable) -> Result<Self, String> {
        let at = *input;
        let found = match kind {
            Some("code") => names.code_at(input),
            Some("site") => names.site_at(input),
            Some("class") => number_at(input, "class"),
            _ => return digits(input),
        };
        let (id, len) = found.ok_or_else(|| format!("expected a {kind:?} at `{at}`"))?;
        take(input, len);
        Ok(id)
    }
}

/// A double's bits (`double`), written as the double.
impl Field for u64 {
    fn write(&self, kind: Option<&str>, _: &dyn Names, out: &mut String) {
        match kind {
            Some("double") => out.push_str(&format!("{:?}", f64::from_bits(*self))),
            _ => out.push_str(&self.to_string()),
        }
    }

    fn read(kind: Option<&str>, input: &mut &str, _: &NameTable) -> Result<Self, String> {
        if kind != Some("double") {
            return digits(input);
        }
        let at = *input;
        let text = span(input, |c| {
            c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+')
        });
        text.parse::<f64>()
            .map(f64::to_bits)
            .map_err(|_| format!("expected a double at `{at}`"))
    }
}

/// `true` and `false`, or with the kind `?yes|no` the text for each.
impl Field for bool {
    fn write(&self, kind: Option<&str>, _: &dyn Names, out: &mut String) {
        let (yes, no) = choices(kind);
        out.push_str(if *self { yes } else { no });
    }

    fn read(kind: Option<&str>, input: &mut &str, _: &NameTable) -> Result<Self, String> {
        let (yes, no) = choices(kind);
        // The longer first: one may start the other (`, int too` and nothing).
        let mut options = [(yes, true), (no, false)];
        options.sort_by_key(|(text, _)| std::cmp::Reverse(text.len()));
        for (text, value) in options {
            if let Some(rest) = input.strip_prefix(text) {
                *input = rest;
                return Ok(value);
            }
        }
        Err(format!("expected `{yes}` or `{no}` at `{input}`"))
    }

    fn absent() -> Option<Self> {
        Some(false)
    }
}

fn choices(kind: Option<&str>) -> (&str, &str) {
    kind.and_then(|k| k.strip_prefix('?'))
        .and_then(|k| k.split_once('|'))
        .unwrap_or(("true", "false"))
}

/// A constant SOM value: `nil`, `true`, `false`, a small integer, `#symbol7`, or the word
/// in hexadecimal.
impl Field for Value {
    fn write(&self, _: Option<&str>, _: &dyn Names, out: &mut String) {
        let v = *self;
        let text = if v == Value::NIL {
            "nil".into()
        } else if v == Value::TRUE {
            "true".into()
        } else if v == Value::FALSE {
            "false".into()
        } else if let Some(i) = v.as_int() {
            i.to_string()
        } else if let Some(s) = v.as_symbol() {
            format!("#symbol{s}")
        } else {
            format!("{:#x}", v.0)
        };
        out.push_str(&text);
    }

    fn read(_: Option<&str>, input: &mut &str, _: &NameTable) -> Result<Self, String> {
        for (text, v) in [
            ("nil", Value::NIL),
            ("true", Value::TRUE),
            ("false", Value::FALSE),
        ] {
            if let Some(rest) = input.strip_prefix(text) {
                *input = rest;
                return Ok(v);
            }
        }
        if let Some(rest) = input.strip_prefix("#symbol") {
            *input = rest;
            return Ok(Value::from_symbol(digits(input)?));
        }
        if let Some(rest) = input.strip_prefix("0x") {
            *input = rest;
            let at = *input;
            let hex = span(input, |c| c.is_ascii_hexdigit());
            return u64::from_str_radix(hex, 16)
                .map(Value)
                .map_err(|_| format!("expected a word at `{at}`"));
        }
        let negative = input.starts_with('-');
        if negative {
            take(input, 1);
        }
        let n: i64 = digits(input)?;
        Ok(Value::from_small_int(if negative { -n } else { n }))
    }
}

/// A plain object's shape: `class7 of 3 fields`.
impl Field for PlainShape {
    fn write(&self, _: Option<&str>, _: &dyn Names, out: &mut String) {
        out.push_str(&format!("class{} of {} fields", self.class, self.fields));
    }

    fn read(_: Option<&str>, input: &mut &str, names: &NameTable) -> Result<Self, String> {
        let class = u32::read(Some("class"), input, names)?;
        *input = input.strip_prefix(" of ").ok_or("expected ` of `")?;
        let fields = digits(input)?;
        *input = input.strip_prefix(" fields").ok_or("expected ` fields`")?;
        Ok(PlainShape { class, fields })
    }
}

/// An operation written by its name.
macro_rules! named {
    ($ty:ty, $all:expr, $name:expr) => {
        impl Field for $ty {
            fn write(&self, _: Option<&str>, _: &dyn Names, out: &mut String) {
                out.push_str($name(*self));
            }

            fn read(_: Option<&str>, input: &mut &str, _: &NameTable) -> Result<Self, String> {
                let w = word(input);
                $all.into_iter()
                    .find(|op| $name(*op) == w)
                    .ok_or_else(|| format!("no {} is called `{w}`", stringify!($ty)))
            }
        }
    };
}

named!(IntOp, IntOp::ALL, IntOp::name);
named!(IntCmp, IntCmp::ALL, IntCmp::name);
named!(FloatOp, FloatOp::ALL, FloatOp::name);
named!(
    DoubleFn,
    [DoubleFn::Sqrt, DoubleFn::Sin, DoubleFn::Cos],
    DoubleFn::name
);
named!(
    DeoptReason,
    [
        DeoptReason::ReceiverClass,
        DeoptReason::NotSmallInts,
        DeoptReason::Overflow,
        DeoptReason::IntRange,
        DeoptReason::LoopEntry,
        DeoptReason::NotDoubles,
        DeoptReason::NilTests,
        DeoptReason::NotAscii,
    ],
    reason_name
);

/// A deoptimization's reason as listings name it.
fn reason_name(r: DeoptReason) -> &'static str {
    match r {
        DeoptReason::ReceiverClass => "receiver_class",
        DeoptReason::NotSmallInts => "not_small_ints",
        DeoptReason::Overflow => "overflow",
        DeoptReason::IntRange => "int_range",
        DeoptReason::LoopEntry => "loop_entry",
        DeoptReason::NotDoubles => "not_doubles",
        DeoptReason::NilTests => "nil_tests",
        DeoptReason::NotAscii => "not_ascii",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(template: &str, text: &str) -> Result<Vec<(String, String)>, String> {
        let mut got: Vec<(String, String)> = Vec::new();
        read(template, text, &mut |slot| {
            match slot {
                Slot::Read(name, _, input) => {
                    let w = span(input, |c| c.is_ascii_alphanumeric());
                    got.push((name.to_string(), w.to_string()));
                }
                Slot::Reset(name) => got.retain(|(n, _)| n != name),
            }
            Ok(())
        })?;
        Ok(got)
    }

    #[test]
    fn a_group_that_does_not_match_leaves_its_fields_out() {
        let t = "new_context {size}[, outer {outer}]";
        assert_eq!(
            read_all(t, "new_context 3, outer v2").unwrap(),
            [("size".into(), "3".into()), ("outer".into(), "v2".into())]
        );
        assert_eq!(
            read_all(t, "new_context 3").unwrap(),
            [("size".into(), "3".into())]
        );
        assert!(read_all(t, "new_context 3, v2").is_err());
    }

    #[test]
    fn a_group_is_written_only_when_a_field_in_it_is_not_its_default() {
        let write_with = |outer: Option<&str>| {
            let mut out = String::new();
            write(
                "new_context {size}[, outer {outer}]",
                &mut out,
                &mut |name, _, out| out.push_str(if name == "size" { "3" } else { outer.unwrap() }),
                &|name| name == "outer" && outer.is_none(),
            );
            out
        };
        assert_eq!(write_with(None), "new_context 3");
        assert_eq!(write_with(Some("v2")), "new_context 3, outer v2");
    }

    #[test]
    fn names_are_read_longest_first_and_by_number() {
        let mut names = NameTable::default();
        names.add_code(1, "T>>at:");
        names.add_code(2, "T>>at:put:");
        let mut input = "T>>at:put:, v1";
        assert_eq!(u32::read(Some("code"), &mut input, &names), Ok(2));
        assert_eq!(input, ", v1");
        let mut input = "code7, v1";
        assert_eq!(u32::read(Some("code"), &mut input, &names), Ok(7));
        assert_eq!(names.code(7), "code7");
    }
}
