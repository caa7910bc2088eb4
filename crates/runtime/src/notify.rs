//! Notifications to subscribers, as they happen.
//!
//! Subscribing is explicit: each subscriber gets its own bounded crossbeam
//! channel, fed with `try_send`, so a slow subscriber never blocks the
//! monitor (what does not fit is counted as dropped), nobody holds a hidden
//! receiver (with no subscriber nothing is queued or dropped), and a late
//! subscriber sees what happens from then on, not stale history.

use crossbeam_channel::{Receiver, Sender, TrySendError};
use railwatch_core::Notification;

/// The sending side, with its drop counter.
#[derive(Debug, Default)]
pub(crate) struct Notifier {
    subscribers: Vec<Sender<Notification>>,
    pub(crate) dropped: u64,
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

    pub(crate) fn send(&mut self, note: Notification) {
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
