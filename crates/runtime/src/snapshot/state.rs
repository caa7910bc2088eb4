//! The host's rail health as the agent serves it (`GET /v1/state`,
//! docs/STATE-API.md): every rail in full, whether it is usable, and a
//! health verdict in the words of Kubernetes' device health (KEP-4680:
//! `Healthy`, `Unhealthy`, `Unknown`, with a message of at most 80
//! characters). One definition of "usable" and of the verdict, for the
//! agent, `railwatch rails` / `check` and the Python module.

use railwatch_core::{PauseReason, RailState};
use serde::{Deserialize, Serialize};

use super::json::{HostJson, RailJson};
use super::{RailSnapshot, Snapshot};

/// The document's schema name and version: a reader refuses another.
pub const STATE_SCHEMA: &str = "railwatch.state/1";

/// The longest health message (KEP-4680's device health message).
pub const HEALTH_MESSAGE_MAX: usize = 80;

/// A device's health, in KEP-4680's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Verdict {
    /// The rail can carry traffic now.
    Healthy,
    /// It cannot: down, held, gone.
    Unhealthy,
    /// Not known (yet): the agent is starting, or never read the port.
    Unknown,
}

/// A verdict and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    /// The verdict.
    pub verdict: Verdict,
    /// Why, in at most [`HEALTH_MESSAGE_MAX`] characters.
    pub message: String,
}

/// Whether a rail may be given work: the selector may pick it (active,
/// not held by the breaker, not waiting for an address or a carrier).
pub fn usable(rail: &RailSnapshot) -> bool {
    rail.available && rail.state == RailState::Active
}

/// A rail's health; `warm` false (the agent has not attached every device
/// present at its start) makes it `Unknown`, so a restarted agent never
/// says healthy before it has looked.
pub fn health(rail: &RailSnapshot, warm: bool) -> Health {
    let (verdict, message) = if !warm {
        (Verdict::Unknown, "railwatch is starting: not every device was attached yet".to_owned())
    } else if usable(rail) {
        let rate = rail.rate.and_then(|r| r.as_gbps()).map_or(String::new(), |g| format!(" at {g} Gb/s"));
        (Verdict::Healthy, format!("active{rate}"))
    } else if rail.last_port_state.is_none() && rail.reason == PauseReason::NotOpened {
        (Verdict::Unknown, "its port was never read".to_owned())
    } else {
        (Verdict::Unhealthy, format!("{} ({})", rail.state.name(), rail.reason.name()))
    };
    Health::new(verdict, message)
}

impl Health {
    /// A verdict and its message, cut to [`HEALTH_MESSAGE_MAX`] characters.
    pub fn new(verdict: Verdict, message: String) -> Health {
        Health { verdict, message: cut(message, HEALTH_MESSAGE_MAX) }
    }
}

/// What ends a text [`cut`] shortened.
pub const CUT_MARK: &str = "...";

/// `text` cut to at most `max` bytes (so at most `max` characters), on a
/// character boundary, ending in [`CUT_MARK`] when it was cut, so a reader
/// sees that something is missing. Bytes, not characters: a consumer may
/// cut its own way (node-problem-detector cuts a plugin's output at
/// `max_output_length` bytes), and ASCII's mark keeps its three bytes
/// within the bound. A `max` shorter than the mark cuts without it.
pub fn cut(mut text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let room = if max >= CUT_MARK.len() { max - CUT_MARK.len() } else { max };
    let mut end = room;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    if max >= CUT_MARK.len() {
        text.push_str(CUT_MARK);
    }
    text
}

/// The document `GET /v1/state` answers.
#[derive(Debug, Clone, Serialize)]
pub struct StateJson<'a> {
    /// [`STATE_SCHEMA`].
    pub schema: &'static str,
    /// The agent's clock at the snapshot (ms since it started).
    pub t_ms: u64,
    /// Every device present at the agent's start has been attached once.
    pub warm: bool,
    /// The host as a whole.
    pub host: HostJson,
    /// Every rail.
    pub rails: Vec<StateRail<'a>>,
}

/// One rail of [`StateJson`]: every field of the snapshot's, then whether
/// it is usable and its health.
#[derive(Debug, Clone, Serialize)]
pub struct StateRail<'a> {
    /// The snapshot's fields.
    #[serde(flatten)]
    pub rail: RailJson<'a>,
    /// See [`usable`].
    pub usable: bool,
    /// See [`health`].
    pub health: Health,
}

impl<'a> StateJson<'a> {
    /// The document for `snapshot`.
    pub fn of(snapshot: &'a Snapshot, warm: bool) -> StateJson<'a> {
        StateJson {
            schema: STATE_SCHEMA,
            t_ms: snapshot.t.0,
            warm,
            host: HostJson::of(&snapshot.host()),
            rails: snapshot
                .rails
                .iter()
                .map(|r| StateRail { rail: RailJson::full(r), usable: usable(r), health: health(r, warm) })
                .collect(),
        }
    }
}

/// What a reader of the document needs of it (`railwatch rails`, `check`,
/// the Python module): owned, and lenient about fields added later.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct StateReply {
    /// Must be [`STATE_SCHEMA`].
    pub schema: String,
    /// Every device present at the agent's start has been attached once.
    pub warm: bool,
    /// Every rail.
    pub rails: Vec<RailReply>,
}

/// One rail of a [`StateReply`].
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RailReply {
    /// `"mlx5_0/1"`.
    pub rail: String,
    /// Its device.
    pub device: String,
    /// Its port.
    pub port: u8,
    /// See [`usable`].
    pub usable: bool,
    /// See [`health`].
    pub health: Health,
}

#[cfg(test)]
mod tests {
    use super::*;

    use proptest::prelude::*;

    #[test]
    fn a_message_is_cut_at_80_bytes_on_a_character_boundary_with_a_mark() {
        let cut_long = cut("é".repeat(100), HEALTH_MESSAGE_MAX);
        assert!(cut_long.len() <= HEALTH_MESSAGE_MAX && cut_long.ends_with("é..."), "{cut_long}");
        assert_eq!(cut("short".into(), HEALTH_MESSAGE_MAX), "short");
        assert_eq!(cut("x".repeat(81), 80), "x".repeat(77) + "...");
        assert_eq!(cut("x".repeat(80), 80), "x".repeat(80));
    }

    proptest! {
        /// Any text, any bound: within the bound in bytes and characters;
        /// unchanged when it fits; otherwise a prefix of it and the mark.
        #[test]
        fn a_cut_text_is_within_its_bound_and_marked(text in "\\PC{0,120}", max in 0usize..100) {
            let out = cut(text.clone(), max);
            prop_assert!(out.len() <= max && out.chars().count() <= max);
            if text.len() <= max {
                prop_assert_eq!(&out, &text);
            } else if max >= CUT_MARK.len() {
                let kept = out.strip_suffix(CUT_MARK).expect("marked");
                prop_assert!(text.starts_with(kept));
                // As much kept as fits: one more character (at most 4 bytes) would not.
                prop_assert!(kept.len() + CUT_MARK.len() + 4 > max);
            } else {
                prop_assert!(text.starts_with(&out));
            }
        }
    }
}
