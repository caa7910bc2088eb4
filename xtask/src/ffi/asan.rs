//! The C API's programs built with AddressSanitizer and UBSan, linked with
//! the static library (the release build's code, as engines ship it).
//!
//! The Rust code is not instrumented, but every allocation it makes goes
//! through the C allocator, which ASan replaces: a program that writes
//! past an array railwatch filled, frees what railwatch owns or uses a
//! handle after its destroy is caught there, as is undefined behaviour in
//! the program and the headers' inline code (the gate's check, the verbs
//! glue). Any report fails the run: UBSan does not recover
//! (`-fno-sanitize-recover=all`), ASan stops at its first error, and
//! LeakSanitizer's report at exit is an exit status too.

use std::process::Command;

/// The compiler's options for the ASan link: both sanitizers, every
/// report fatal, frame pointers for the reports' stacks.
pub const FLAGS: [&str; 3] = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"];

/// The runtime's options. `detect_leaks=1` is LeakSanitizer, on by default
/// on x86_64 Linux; written out so a change of default cannot turn it off.
/// `strict_string_checks` and `detect_stack_use_after_return` look further
/// than the defaults. `print_stacktrace` gives UBSan's reports a stack.
const ASAN_OPTIONS: &str = "detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1";
const UBSAN_OPTIONS: &str = "print_stacktrace=1:halt_on_error=1";

/// Sets the sanitizers' options on the command that runs a program.
pub fn configure(cmd: &mut Command) {
    cmd.env("ASAN_OPTIONS", ASAN_OPTIONS).env("UBSAN_OPTIONS", UBSAN_OPTIONS);
}
