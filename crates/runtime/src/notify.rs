//! Notifications to subscribers, as they happen.
//!
//! Subscribing is explicit: each subscriber gets its own bounded crossbeam
//! channel, fed with `try_send`, so a slow subscriber never blocks the
//! monitor (what does not fit is counted as dropped), nobody holds a hidden
//! receiver (with no subscriber nothing is queued or dropped), and a late
//! subscriber sees what happens from then on, not stale history.
//!
//! Within one wake-up, lost work is told first: the notifications of a
//! wake-up are held and sent at its end, every `WorkLost` ahead of the rest
//! (each group in its order), so an engine fails the work before it acts
//! on anything else the wake-up learnt.

use crossbeam_channel::{Receiver, Sender, TrySendError};
use railwatch_core::{Happening, Notification};

/// The sending side, with its drop counter.
#[derive(Debug, Default)]
pub(crate) struct Notifier {
    subscribers: Vec<Sender<Notification>>,
    pub(crate) dropped: u64,
    /// A wake-up is in progress: notifications wait in `held`.
    holding: bool,
    held: Vec<Notification>,
}

impl Notifier {
    /// A new subscriber's receiver, holding at most `capacity` unread.
    pub(crate) fn subscribe(&mut self, capacity: usize) -> Receiver<Notification> {
        let (tx, rx) = crossbeam_channel::bounded(capacity.max(1));
        self.subscribers.push(tx);
        rx
    }

    /// A new subscriber's receiver with no bound: for a reader that empties
    /// it after every `poll_once` (a simulator), so nothing is ever lost.
    pub(crate) fn subscribe_unbounded(&mut self) -> Receiver<Notification> {
        let (tx, rx) = crossbeam_channel::unbounded();
        self.subscribers.push(tx);
        rx
    }

    /// Holds what is sent from now until [`release`](Self::release).
    pub(crate) fn hold(&mut self) {
        self.holding = true;
    }

    /// Sends what was held: lost work first, then the rest, each in order.
    /// The buffer is kept: no allocation once it has grown.
    pub(crate) fn release(&mut self) {
        self.holding = false;
        let mut held = std::mem::take(&mut self.held);
        let lost = |n: &Notification| matches!(n.what, Happening::WorkLost { .. });
        for note in held.iter().filter(|n| lost(n)).chain(held.iter().filter(|n| !lost(n))) {
            self.deliver(*note);
        }
        held.clear();
        self.held = held;
    }

    pub(crate) fn send(&mut self, note: Notification) {
        if self.holding {
            return self.held.push(note);
        }
        self.deliver(note);
    }

    fn deliver(&mut self, note: Notification) {
        let dropped = &mut self.dropped;
        // A dropped receiver unsubscribes.
        self.subscribers.retain(|tx| match tx.try_send(note) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                *dropped += 1;
                true
            }
            Err(TrySendError::Disconnected(_)) => false,
        });
    }
}
