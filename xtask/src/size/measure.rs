//! The measures of one file: its lines of code outside test code, its
//! functions' lengths, and the out-of-line test modules it declares.
//!
//! Test code is every item under a `#[cfg(test)]` (or `#[cfg(all(test,
//! ...))]`) attribute, from the attribute to the item's closing brace or
//! semicolon, and the whole file under an inner `#![cfg(test)]`. A
//! function runs from the line of its `fn` to the line of its closing
//! brace (rustfmt-formatted code: the signature starts on the `fn` line);
//! a nested function is measured on its own and inside its parent, a
//! closure is part of its function, a bodiless `fn` (a trait's or an
//! `extern` block's) is no function here.

use super::lex::{Kind, Token, lex};

/// One function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Function {
    /// Its name.
    pub name: String,
    /// The line of its `fn`, 1-based.
    pub line: usize,
    /// Lines from the `fn` line to the closing brace, both included.
    pub lines: usize,
}

/// What one file measures.
#[derive(Debug, Default)]
pub struct Measure {
    /// Lines with code on them, test code aside.
    pub code: usize,
    /// Every function outside test code.
    pub functions: Vec<Function>,
    /// `mod NAME;` under a test attribute: the files of those modules are
    /// test code.
    pub test_modules: Vec<String>,
    /// Every path outside test code that starts at `crate` or `super`
    /// (`use crate::{a::X, b}` is two), for the import circles.
    pub paths: Vec<Vec<String>>,
}

/// Measures one file's text.
pub fn measure(src: &str) -> Measure {
    let lexed = lex(src);
    let tokens = &lexed.tokens;
    let mut tested = vec![false; lexed.code.len()];
    let mut test_modules = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let Some((attr_end, inner, is_test)) = attribute(tokens, i) else {
            i += 1;
            continue;
        };
        if !is_test {
            i = attr_end + 1;
        } else if inner {
            tested.iter_mut().for_each(|t| *t = true);
            break;
        } else {
            let (end, module) = item(tokens, attr_end + 1);
            let last = tokens.get(end).map_or(tested.len() - 1, |t| t.line);
            tested[tokens[i].line..=last].iter_mut().for_each(|t| *t = true);
            test_modules.extend(module);
            i = end + 1;
        }
    }
    let code = lexed.code.iter().zip(&tested).filter(|(code, test)| **code && !**test).count();
    let functions = functions(tokens).into_iter().filter(|f| !tested[f.line - 1]).collect();
    let mut paths = Vec::new();
    for (k, t) in tokens.iter().enumerate() {
        let starts = matches!(ident(Some(t)), Some("crate" | "super")) && !is_path_sep(tokens, k.wrapping_sub(2));
        if starts && !tested[t.line] {
            path_at(tokens, k, Vec::new(), &mut paths);
        }
    }
    Measure { code, functions, test_modules, paths }
}

/// Whether `tokens[k..]` starts with `::`.
fn is_path_sep(tokens: &[Token], k: usize) -> bool {
    is_punct(tokens.get(k), ':') && is_punct(tokens.get(k + 1), ':')
}

/// The paths starting at `k` (an identifier or a `{` group), after
/// `prefix`, pushed to `out`.
fn path_at(tokens: &[Token], k: usize, mut prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    if is_punct(tokens.get(k), '{') {
        let (end, mut depth, mut start) = (closing(tokens, k), 0usize, k + 1);
        for j in k + 1..=end {
            match tokens[j].kind {
                Kind::Punct('(' | '[' | '{') => depth += 1,
                Kind::Punct(')' | ']' | '}') if depth > 0 => depth -= 1,
                Kind::Punct(',' | '}') if depth == 0 => {
                    if start < j {
                        path_at(tokens, start, prefix.clone(), out);
                    }
                    start = j + 1;
                }
                _ => {}
            }
        }
        return;
    }
    let Some(name) = ident(tokens.get(k)) else {
        return out.push(prefix);
    };
    prefix.push(name.to_string());
    if is_path_sep(tokens, k + 1) {
        path_at(tokens, k + 3, prefix, out);
    } else {
        out.push(prefix);
    }
}

fn is_punct(t: Option<&Token>, c: char) -> bool {
    t.is_some_and(|t| t.kind == Kind::Punct(c))
}

fn ident(t: Option<&Token>) -> Option<&str> {
    match t.map(|t| &t.kind) {
        Some(Kind::Ident(s)) => Some(s),
        _ => None,
    }
}

/// The index of the delimiter closing the one at `open` (the last token
/// when the text ends first).
fn closing(tokens: &[Token], open: usize) -> usize {
    let mut depth = 0usize;
    for (k, t) in tokens.iter().enumerate().skip(open) {
        match t.kind {
            Kind::Punct('{' | '(' | '[') => depth += 1,
            Kind::Punct('}' | ')' | ']') => {
                depth -= 1;
                if depth == 0 {
                    return k;
                }
            }
            _ => {}
        }
    }
    tokens.len().saturating_sub(1)
}

/// An attribute starting at `at` (`#[...]` or `#![...]`): the index of
/// its `]`, whether it is inner, and whether it makes its item test code.
fn attribute(tokens: &[Token], at: usize) -> Option<(usize, bool, bool)> {
    if !is_punct(tokens.get(at), '#') {
        return None;
    }
    let inner = is_punct(tokens.get(at + 1), '!');
    let open = at + 1 + usize::from(inner);
    if !is_punct(tokens.get(open), '[') {
        return None;
    }
    let end = closing(tokens, open);
    let body = &tokens[open + 1..end];
    let is_test = ident(body.first()) == Some("cfg")
        && is_punct(body.get(1), '(')
        && is_punct(body.last(), ')')
        && cfg_is_test(&body[2..body.len() - 1]);
    Some((end, inner, is_test))
}

/// Whether a cfg predicate holds only under test: `test`, or `all(...)`
/// with such a predicate in it (`any` and `not` never say so).
fn cfg_is_test(pred: &[Token]) -> bool {
    match pred {
        [t] => ident(Some(t)) == Some("test"),
        [t, open, inner @ .., close] if ident(Some(t)) == Some("all") => {
            is_punct(Some(open), '(') && is_punct(Some(close), ')') && split_top(inner).iter().any(|p| cfg_is_test(p))
        }
        _ => false,
    }
}

/// `tokens` split at their top-level commas.
fn split_top(tokens: &[Token]) -> Vec<&[Token]> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (k, t) in tokens.iter().enumerate() {
        match t.kind {
            Kind::Punct('(' | '[' | '{') => depth += 1,
            Kind::Punct(')' | ']' | '}') => depth -= 1,
            Kind::Punct(',') if depth == 0 => {
                parts.push(&tokens[start..k]);
                start = k + 1;
            }
            _ => {}
        }
    }
    parts.push(&tokens[start..]);
    parts
}

/// Keywords that start an item (after its visibility and qualifiers):
/// such an item ends at its body or `;`, never at a comma.
const ITEM_KEYWORDS: [&str; 13] = [
    "fn",
    "mod",
    "impl",
    "struct",
    "enum",
    "union",
    "trait",
    "use",
    "const",
    "static",
    "type",
    "extern",
    "macro_rules",
];

/// The item (or statement, field, variant) starting at `at`, after more
/// attributes: the index of its last token, and the name of the module
/// when it is `mod NAME;`.
fn item(tokens: &[Token], mut at: usize) -> (usize, Option<String>) {
    while let Some((end, _, _)) = attribute(tokens, at) {
        at = end + 1;
    }
    let is_item = tokens[at..].iter().take(8).any(|t| ident(Some(t)).is_some_and(|w| ITEM_KEYWORDS.contains(&w)));
    let mut k = at;
    while k < tokens.len() {
        match tokens[k].kind {
            Kind::Punct(';') => {
                let module = (k >= at + 2 && ident(tokens.get(k - 2)) == Some("mod"))
                    .then(|| ident(tokens.get(k - 1)).map(str::to_string))
                    .flatten();
                return (k, module);
            }
            Kind::Punct('{') => return (closing(tokens, k), None),
            Kind::Punct('(' | '[') => k = closing(tokens, k),
            // The end of what encloses it: the item ended just before.
            Kind::Punct('}' | ')' | ']') => return (k.saturating_sub(1).max(at), None),
            Kind::Punct(',') if !is_item => return (k, None),
            _ => {}
        }
        k += 1;
    }
    (tokens.len().saturating_sub(1), None)
}

/// Every function with a body.
fn functions(tokens: &[Token]) -> Vec<Function> {
    let mut found = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        let (Some("fn"), Some(name)) = (ident(Some(t)), ident(tokens.get(i + 1))) else { continue };
        let mut k = i + 2;
        while k < tokens.len() {
            match tokens[k].kind {
                Kind::Punct(';') => break,
                Kind::Punct('(' | '[') => k = closing(tokens, k),
                Kind::Punct('{') => {
                    let end = closing(tokens, k);
                    let lines = tokens[end].line - t.line + 1;
                    found.push(Function { name: name.to_string(), line: t.line + 1, lines });
                    break;
                }
                _ => {}
            }
            k += 1;
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_paths_from_crate_and_super_are_collected_outside_test_code() {
        let src = "use crate::{a::X, b::{c, d::E}};\nuse super::f;\npub(crate) fn g() { crate::h::i(); }\n#[cfg(test)]\nmod tests { use crate::z::Z; }\n";
        let paths = measure(src).paths;
        let text: Vec<String> = paths.iter().map(|p| p.join("::")).collect();
        assert_eq!(text, ["crate::a::X", "crate::b::c", "crate::b::d::E", "super::f", "crate", "crate::h::i"]);
    }

    fn lengths(src: &str) -> Vec<(String, usize, usize)> {
        measure(src).functions.into_iter().map(|f| (f.name, f.line, f.lines)).collect()
    }

    #[test]
    fn a_function_runs_from_its_fn_line_to_its_closing_brace() {
        let src =
            "/// Doc.\n#[inline]\npub fn one(x: [u8; 4]) -> usize {\n    let s = \"}\";\n    x.len() + s.len()\n}\n";
        assert_eq!(lengths(src), [("one".to_string(), 3, 4)]);
    }

    #[test]
    fn nested_fns_closures_and_impl_blocks() {
        let src = "\
impl<'a> Thing<'a> {
    pub fn outer(&self) -> impl Fn() -> char + 'a {
        fn inner(c: char) -> char {
            if c == '{' { '}' } else { c }
        }
        let f = move || {
            let _ = inner('x');
        };
        f();
        move || '{'
    }

    fn callback(&self, f: fn(u8) -> u8) -> u8 {
        f(1)
    }
}
trait T {
    fn declared(&self);
    fn defaulted(&self) {}
}
";
        let found = lengths(src);
        let want = [("outer", 2, 10), ("inner", 3, 3), ("callback", 13, 3), ("defaulted", 19, 1)];
        let want: Vec<_> = want.iter().map(|(n, l, len)| (n.to_string(), *l, *len)).collect();
        assert_eq!(found, want);
    }

    #[test]
    fn raw_strings_and_lifetimes_do_not_confuse_the_braces() {
        let src = "fn a<'b>(x: &'b str) -> &'b str {\n    let _ = r#\"}\n}\"#;\n    x\n}\nfn c() {}\n";
        assert_eq!(lengths(src), [("a".to_string(), 1, 5), ("c".to_string(), 6, 1)]);
    }

    #[test]
    fn test_code_is_not_counted() {
        let src = "\
fn real() {
    work();
}

#[cfg(test)]
mod tests {
    #[test]
    fn long() {
        a();
        b();
    }
}
#[cfg(all(test, not(loom)))]
fn helper() {}
#[cfg(not(test))]
fn shipped() {}
#[cfg(test)]
mod more;
#[cfg(any(test, feature = \"x\"))]
fn maybe() {}
";
        let m = measure(src);
        let names: Vec<&str> = m.functions.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["real", "shipped", "maybe"]);
        // real (3), cfg(not(test)) + shipped (2), cfg(any) + maybe (2).
        assert_eq!(m.code, 7);
        assert_eq!(m.test_modules, ["more"]);
    }

    #[test]
    fn a_test_field_ends_at_its_comma() {
        let src = "struct S {\n    #[cfg(test)]\n    probe: u8,\n    kept: u8,\n}\n";
        assert_eq!(measure(src).code, 3);
    }

    #[test]
    fn an_inner_test_attribute_makes_the_whole_file_test_code() {
        let m = measure("//! Doc.\n#![cfg(test)]\nfn f() {\n}\n");
        assert_eq!((m.code, m.functions.len()), (0, 0));
    }

    #[test]
    fn comments_and_blank_lines_are_not_code() {
        let src = "//! Module.\n\n/* a\n   block */\nuse std::fs; // trailing\n\n/// Doc.\nconst X: u8 = 1;\n";
        assert_eq!(measure(src).code, 2);
    }
}
