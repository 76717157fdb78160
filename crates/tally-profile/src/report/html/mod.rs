//! The interactive HTML report: one self-contained file (no network, no other file) with the
//! call graph per (method, tier) coloured by the amortization verdicts, each method's
//! recompilation diagram, a flame graph with tiers coloured and a search box, a timeline of
//! compiles, deopts and GCs, the VM-profiler breakdown and a source view with samples per line.
//!
//! The profile's data goes into the page as JSON in a `<script type="application/json">`
//! element, with `<`, `>` and `&` written as JSON escapes so that no name in it can end the
//! element; the page's script builds everything with DOM calls that treat names as text
//! (`textContent`, attributes), never as markup. A content security policy forbids the page
//! any request, so what it shows is what the file holds.

mod graph;
mod history;
mod layout;
mod model;

pub use model::HtmlOptions;

use crate::profile::Profile;

const TEMPLATE: &str = include_str!("page.html");
const STYLE: &str = include_str!("page.css");
const SCRIPT: &str = include_str!("page.js");

/// The report of `p`. `source` reads a source file the profile names (`None` when it cannot),
/// for the source view and the source lines of bytecode ranges.
pub fn render_html(
    p: &Profile,
    source: &dyn Fn(&str) -> Option<String>,
    options: &HtmlOptions,
) -> String {
    let model = model::build(p, source, options);
    let json = serde_json::to_string(&model).expect("the report's model is plain data");
    fill(&escape_text(&model.title), &script_safe(&json))
}

fn fill(title: &str, data: &str) -> String {
    // Replaced in one pass each, in an order where no inserted text holds a later marker:
    // the style and script are ours, the title is escaped, and the data goes in last.
    TEMPLATE
        .replacen("/*STYLE*/", STYLE, 1)
        .replacen("/*SCRIPT*/", SCRIPT, 1)
        .replacen("<!--TITLE-->", title, 1)
        .replacen("<!--DATA-->", data, 1)
}

/// JSON that may sit inside a `<script>` element: the characters that could close it or be
/// read as markup (`<`, `>`, `&`) only ever occur inside JSON strings, where their `\u` escapes
/// mean the same; U+2028 and U+2029 likewise, for old script parsers.
fn script_safe(json: &str) -> String {
    let mut out = String::with_capacity(json.len() + json.len() / 16);
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// Text for an HTML element's content.
fn escape_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests;
