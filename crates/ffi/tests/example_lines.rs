//! The integration an engine writes for embedding 1 (drain, actions,
//! timers, logging) stays small: `examples/slots_engine.cpp` marks it
//! between `// railwatch: begin` and `// railwatch: end`, and its lines of
//! code (neither blank nor only a comment) are at most 100, the number
//! crates/ffi/README.md states.

use std::path::Path;

/// The text between the markers of `text`.
fn integration(text: &str) -> &str {
    let start = text.find("// railwatch: begin\n").expect("the example marks where railwatch begins");
    let end = text.find("// railwatch: end").expect("the example marks where railwatch ends");
    text[start + "// railwatch: begin\n".len()..end].trim_matches('\n')
}

/// Lines of code between the markers of `text`.
fn integration_lines(text: &str) -> usize {
    integration(text)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("//") && !l.starts_with("/*") && !l.starts_with('*'))
        .count()
}

#[test]
fn the_example_engine_integrates_in_at_most_100_lines_and_the_readme_says_how_many() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let example = std::fs::read_to_string(dir.join("examples/slots_engine.cpp")).expect("the example");
    let n = integration_lines(&example);
    assert!(n <= 100, "examples/slots_engine.cpp: {n} lines of integration code, more than 100");
    let readme = std::fs::read_to_string(dir.join("README.md")).expect("the README");
    let stated = format!("**{n} lines of code**");
    assert!(readme.contains(&stated), "crates/ffi/README.md should state the count as {stated}");
    let shown = format!("```cpp\n{}\n```", integration(&example));
    assert!(readme.contains(&shown), "crates/ffi/README.md should show the example's integration as it is");
}

#[test]
fn comments_and_blank_lines_are_not_counted() {
    let text = "x\n// railwatch: begin\n\n// why\nint a;\n  /* more */\n * cont\nint b;\n// railwatch: end\n";
    assert_eq!(integration_lines(text), 2);
}
