//! The programs written against 0.1.0's header (`crates/ffi/tests/compat/`).
//!
//! Until 0.2, `railwatch.h` keeps each name and form 0.1.0 had that later
//! changed, deprecated. Such a program builds with every other warning an
//! error, and each deprecation the header declares must be heard in its
//! compiler's output: an alias that stopped warning, or one no program
//! uses, fails.

use std::process::Command;

/// The warnings a compat program may get without failing: a deprecated
/// name, and (C) a deprecated call form, which is a `warning` attribute.
pub const ALLOWED: [&str; 2] = ["-Wno-error=deprecated-declarations", "-Wno-error=attribute-warning"];

/// The header's markers of a deprecation; each is followed by `("message")`.
const MARKERS: [&str; 2] = ["RW_DEPRECATED_(\"", "RW_DEPRECATED_CALL_(\""];

/// The messages of the header's deprecations, each once, in order.
pub fn messages(header: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for marker in MARKERS {
        for (at, _) in header.match_indices(marker) {
            let rest = &header[at + marker.len()..];
            if let Some(end) = rest.find('"') {
                let message = rest[..end].to_string();
                if !found.contains(&message) {
                    found.push(message);
                }
            }
        }
    }
    found
}

/// The messages not in the compiler's output `diagnostics`.
fn unheard<'a>(messages: &'a [String], diagnostics: &str) -> Vec<&'a str> {
    messages.iter().map(String::as_str).filter(|m| !diagnostics.contains(m)).collect()
}

/// Runs the compile `cmd` (given [`ALLOWED`]): an error unless it
/// succeeded and its output holds every one of `messages`.
pub fn compile(what: &str, cmd: &mut Command, messages: &[String]) -> Result<(), String> {
    if messages.is_empty() {
        return Err(format!("{what}: railwatch.h deprecates nothing, so a program of 0.1.0 has nothing to check"));
    }
    eprintln!("==> {what}: {cmd:?}");
    let out = cmd.output().map_err(|e| format!("{what}: cannot start: {e}"))?;
    let diagnostics = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        eprint!("{diagnostics}");
        return Err(format!("{what} failed ({})", out.status));
    }
    let missing = unheard(messages, &diagnostics);
    if !missing.is_empty() {
        eprint!("{diagnostics}");
        return Err(format!("{what}: no deprecation warning said {missing:?}"));
    }
    eprintln!("==> {what}: each of the header's {} deprecations warned", messages.len());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_header_and_the_warnings() {
        let header = "#define RW_DEPRECATED_(msg) x\nenum { A RW_DEPRECATED_(\"A: use B\") = 1 };\n\
                      RW_DEPRECATED_CALL_(\"f(h): pass &h\") static void f_(void);\n\
                      RW_DEPRECATED_(\"f(h): pass &h\") inline void f(T *&h);\n";
        let found = messages(header);
        assert_eq!(found, ["A: use B", "f(h): pass &h"]);
        let gcc = "x.c:3: warning: 'A' is deprecated: A: use B [-Wdeprecated-declarations]\n";
        assert_eq!(unheard(&found, gcc), ["f(h): pass &h"]);
        assert!(
            unheard(
                &found,
                &format!("{gcc}x.c:9: warning: call to 'f_' declared with attribute warning: f(h): pass &h")
            )
            .is_empty()
        );
    }
}
