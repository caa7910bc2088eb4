//! The input log's reader and replay on arbitrary input.
//!
//! - Never panics, whatever the bytes (invalid UTF-8 is skipped: `railwatch
//!   replay` refuses it before reading).
//! - A refusal names a line inside the text (1 = the header).
//! - A log that reads replays to its end or stops at a divergence or a log
//!   error whose line is inside the text too; a divergence names an entry
//!   the log has.

#![no_main]

use libfuzzer_sys::fuzz_target;
use railwatch_scenario::rwlog::{self, ReplayError};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let lines = text.split_inclusive('\n').count().max(1);
    let log = match rwlog::read(text) {
        Ok(log) => log,
        Err(e) => {
            assert!((1..=lines).contains(&e.line), "line {} outside the text's {lines} lines", e.line);
            return;
        }
    };
    assert!(log.entries.len() < lines);
    assert!(log.entries.windows(2).all(|w| w[0].t() <= w[1].t()), "entries out of time order");
    match rwlog::replay(&log, |_, _| {}) {
        Ok(r) => assert!(r.inputs <= log.entries.len()),
        Err(ReplayError::Log(e)) => assert!((1..=lines).contains(&e.line), "{e}"),
        Err(ReplayError::Diverged(d)) => {
            assert!(d.index < log.entries.len(), "{d}");
            assert_eq!(d.line, d.index + 2);
        }
    }
});
