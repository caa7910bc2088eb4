//! The open connections of the `/metrics` server, bounded: at the bound a
//! new connection takes the place of the one that has been quiet longest
//! (idle clients are what fills a table, and a scraper moves bytes), so
//! no number of clients that send nothing, or slowly, keeps a scraper
//! out; and each connection's last moment of progress, which its idle
//! timeout reads.
//!
//! A closed connection holds its socket until its task is dropped, which
//! happens on a later turn of the runtime; so the accept loop waits
//! ([`Connections::room`]) until the tasks alive are within the bound
//! before it accepts again, and a flood of new connections (each closing
//! another) cannot pile up sockets past it to the descriptor limit.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;
use tokio::task::AbortHandle;

/// When a connection last moved a byte, in ms since the table's start.
#[derive(Debug)]
pub(super) struct Activity {
    epoch: Instant,
    last_ms: AtomicU64,
}

impl Activity {
    fn new(epoch: Instant) -> Activity {
        let a = Activity { epoch, last_ms: AtomicU64::new(0) };
        a.touch();
        a
    }

    /// Now is a moment of progress.
    fn touch(&self) {
        let ms = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    fn last_ms(&self) -> u64 {
        self.last_ms.load(Ordering::Relaxed)
    }

    /// How long since the last progress.
    pub(super) fn quiet_for(&self) -> Duration {
        let now = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        Duration::from_millis(now.saturating_sub(self.last_ms()))
    }
}

struct Slot {
    activity: Arc<Activity>,
    abort: Option<AbortHandle>,
}

#[derive(Default)]
struct Table {
    next: u64,
    open: HashMap<u64, Slot>,
}

/// The open connections, at most `max`.
pub(super) struct Connections {
    max: usize,
    epoch: Instant,
    table: Mutex<Table>,
    /// Tickets not yet dropped: the table's and the evicted ones whose
    /// task (and socket) is not dropped yet.
    alive: AtomicUsize,
    /// Told when a ticket is dropped.
    freed: Notify,
    /// The most tickets alive at once.
    peak: AtomicUsize,
}

/// One admitted connection; dropping it (the connection's task ending or
/// being aborted) frees its place.
pub(super) struct Ticket {
    id: u64,
    connections: Arc<Connections>,
    /// Its progress, touched by [`Watched`].
    pub(super) activity: Arc<Activity>,
}

impl Connections {
    /// A table of at most `max` connections (at least one).
    pub(super) fn new(max: usize) -> Arc<Connections> {
        Arc::new(Connections {
            max: max.max(1),
            epoch: Instant::now(),
            table: Mutex::default(),
            alive: AtomicUsize::new(0),
            freed: Notify::new(),
            peak: AtomicUsize::new(0),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        // A panic while holding it leaves a consistent map (every change
        // is one insert or remove).
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Admits a connection: at the bound, the quietest one is closed for
    /// it (aborted; the task's end frees nothing twice).
    pub(super) fn admit(self: &Arc<Self>) -> Ticket {
        let activity = Arc::new(Activity::new(self.epoch));
        let (id, evicted) = {
            let mut t = self.lock();
            let evicted = if t.open.len() >= self.max {
                let quietest = t.open.iter().min_by_key(|(_, s)| s.activity.last_ms()).map(|(id, _)| *id);
                quietest.and_then(|id| t.open.remove(&id))
            } else {
                None
            };
            let id = t.next;
            t.next += 1;
            t.open.insert(id, Slot { activity: Arc::clone(&activity), abort: None });
            (id, evicted)
        };
        if let Some(abort) = evicted.and_then(|s| s.abort) {
            abort.abort();
        }
        let alive = self.alive.fetch_add(1, Ordering::Relaxed) + 1;
        self.peak.fetch_max(alive, Ordering::Relaxed);
        Ticket { id, connections: Arc::clone(self), activity }
    }

    /// Returns once at most `max` tickets are alive, so admitting one more
    /// holds at most `max + 1` sockets (one of them closing).
    pub(super) async fn room(&self) {
        loop {
            let freed = self.freed.notified();
            if self.alive.load(Ordering::Relaxed) <= self.max {
                return;
            }
            freed.await;
        }
    }

    /// How many are open.
    pub(super) fn len(&self) -> usize {
        self.lock().open.len()
    }

    /// The most connections (and so sockets) held at once, closing ones
    /// included.
    pub(super) fn peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }
}

impl Ticket {
    /// Which connection this is.
    pub(super) fn id(&self) -> u64 {
        self.id
    }
}

impl Connections {
    /// How to close connection `id`'s task when it is evicted.
    pub(super) fn set_abort(&self, id: u64, abort: AbortHandle) {
        match self.lock().open.get_mut(&id) {
            Some(slot) => slot.abort = Some(abort),
            // Evicted (or ended) before its task was known: close it now.
            None => abort.abort(),
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.connections.lock().open.remove(&self.id);
        self.connections.alive.fetch_sub(1, Ordering::Relaxed);
        self.connections.freed.notify_one();
    }
}

/// A stream whose every byte moved touches its [`Activity`].
pub(super) struct Watched<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S> Watched<S> {
    pub(super) fn new(inner: S, activity: Arc<Activity>) -> Watched<S> {
        Watched { inner, activity }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.touch();
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_bounded_and_a_ticket_frees_its_place() {
        let c = Connections::new(2);
        let a = c.admit();
        let b = c.admit();
        assert_eq!(c.len(), 2);
        let third = c.admit();
        assert_eq!(c.len(), 2, "the quietest gave its place");
        drop(third);
        assert_eq!(c.len(), 1);
        drop((a, b));
        assert_eq!(c.len(), 0);
    }

    #[test]
    fn the_quietest_connection_is_the_one_evicted() {
        let c = Connections::new(2);
        let old = c.admit();
        std::thread::sleep(Duration::from_millis(5));
        let busy = c.admit();
        std::thread::sleep(Duration::from_millis(5));
        old.activity.touch(); // old moved bytes since: busy is now the quietest
        let _new = c.admit();
        let open: Vec<u64> = c.lock().open.keys().copied().collect();
        assert!(open.contains(&old.id) && !open.contains(&busy.id), "{open:?}");
    }
}
