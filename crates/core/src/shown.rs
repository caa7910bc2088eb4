//! Input shown back in an error line: every control character escaped
//! (no ESC or BEL reaches a terminal or the journal) and the length
//! bounded (an 8 MiB name is no 8 MiB line). One rule for the scenario
//! parser, the config file and the flags.

/// Most characters of a refused name an error line repeats.
pub const MAX_SHOWN_NAME_CHARS: usize = 64;

/// `name` as an error line shows it: quoted, every control character
/// escaped (no ESC or BEL reaches a terminal or the journal), and cut
/// after [`MAX_SHOWN_NAME_CHARS`] characters, saying how long it was (an
/// 8 MiB name is no 8 MiB line).
///
/// ```
/// use railwatch_core::shown_name;
/// assert_eq!(shown_name("a\u{1b}[31m"), "\"a\\u{1b}[31m\"");
/// assert_eq!(shown_name(&"x".repeat(100)), format!("\"{}\"… (100 bytes)", "x".repeat(64)));
/// ```
pub fn shown_name(name: &str) -> String {
    let head: String = name.chars().take(MAX_SHOWN_NAME_CHARS).collect();
    let quoted = format!("{head:?}");
    if head.len() < name.len() { format!("{quoted}… ({} bytes)", name.len()) } else { quoted }
}

/// Most characters of an error line.
pub const MAX_ERROR_LINE_CHARS: usize = 1024;

/// `line` made safe to print as one error line: control characters
/// (newlines included) escaped, cut after [`MAX_ERROR_LINE_CHARS`]
/// characters with a note of the length.
///
/// ```
/// use railwatch_core::error_line;
/// assert_eq!(error_line("a\u{7}b"), "a\\u{7}b");
/// assert!(error_line(&"y".repeat(5000)).ends_with("… (5000 bytes)"));
/// ```
pub fn error_line(line: &str) -> String {
    let mut out = String::with_capacity(line.len().min(MAX_ERROR_LINE_CHARS + 32));
    for (n, c) in line.chars().enumerate() {
        if n == MAX_ERROR_LINE_CHARS {
            out.push_str(&format!("… ({} bytes)", line.len()));
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}
