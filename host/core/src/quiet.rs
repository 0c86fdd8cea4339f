//! Polling without waking one's own task.
//!
//! On tokio's multi-threaded runtime a task woken while it runs is queued
//! again as a yield, and queuing it rouses an idle worker to steal it (a
//! futex wake and, on a VM, an interrupt): the worker wakes, finds nothing,
//! and sleeps again. Futures polled together in one task wake it so all
//! the time: hyper's server hands a request's body to the handler through a
//! channel (every POST), a connection driven beside its sender does the same
//! with each answer. [`drive`] and [`quietly`] poll such futures with a
//! waker of their own: what they wake while they are being polled is polled
//! again at once, within the same turn; wake-ups from elsewhere (a socket, a
//! timer, another task) wake the task as usual.

use std::future::{Future, poll_fn};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use futures::task::AtomicWaker;

/// How often [`drive`] polls again at once for wake-ups its own parts sent
/// each other before it yields to the runtime (a part waking itself forever
/// must not hold the worker).
const ROUNDS: usize = 64;

/// Poll `poll` until it is ready, as a future of the calling task; what it
/// wakes while it is polled is polled again at once, up to [`ROUNDS`] times
/// a turn.
pub fn drive<T>(mut poll: impl FnMut(&mut Context<'_>) -> Poll<T>) -> impl Future<Output = T> {
    let shared = Arc::new(Shared {
        task: AtomicWaker::new(),
        polling: AtomicBool::new(false),
        woken: AtomicBool::new(false),
    });
    let waker = Waker::from(shared.clone());
    poll_fn(move |cx| {
        shared.task.register(cx.waker());
        let mut own = Context::from_waker(&waker);
        for _ in 0..ROUNDS {
            shared.woken.store(false, Ordering::SeqCst);
            shared.polling.store(true, Ordering::SeqCst);
            let polled = poll(&mut own);
            shared.polling.store(false, Ordering::SeqCst);
            if polled.is_ready() {
                return polled;
            }
            if !shared.woken.swap(false, Ordering::SeqCst) {
                return Poll::Pending;
            }
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    })
}

struct Shared {
    task: AtomicWaker,
    /// Set while [`drive`] polls its parts ...
    polling: AtomicBool,
    /// ... and a wake-up meanwhile noted here, for another round.
    woken: AtomicBool,
}

impl Wake for Shared {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if self.polling.load(Ordering::SeqCst) {
            self.woken.store(true, Ordering::SeqCst);
        } else {
            self.task.wake();
        }
    }
}

/// `future`, polled by [`drive`].
pub fn quietly<F: Future>(future: F) -> impl Future<Output = F::Output> {
    let mut future = Box::pin(future);
    drive(move |cx| future.as_mut().poll(cx))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// A waker counting its wake-ups.
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn what_the_parts_wake_while_polled_is_polled_again_not_the_task() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        // A part that wakes itself twice, then is ready: one poll of the task.
        let mut rounds = 0;
        let mut once = std::pin::pin!(drive(|cx| {
            rounds += 1;
            if rounds < 3 {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            Poll::Ready(rounds)
        }));
        assert_eq!(once.as_mut().poll(&mut cx), Poll::Ready(3));
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
        // A part that never stops waking itself: the task yields after the
        // bound, woken once to come back.
        let mut forever = std::pin::pin!(drive(|cx| {
            cx.waker().wake_by_ref();
            Poll::<()>::Pending
        }));
        assert!(forever.as_mut().poll(&mut cx).is_pending());
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        // Woken from elsewhere once it returned: the task is woken.
        let kept = std::sync::Mutex::new(None::<Waker>);
        let mut later = std::pin::pin!(drive(|cx| {
            *kept.lock().unwrap() = Some(cx.waker().clone());
            Poll::<()>::Pending
        }));
        assert!(later.as_mut().poll(&mut cx).is_pending());
        kept.lock().unwrap().take().unwrap().wake();
        assert_eq!(count.0.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_future_woken_by_what_it_polls_is_polled_again_in_the_same_turn() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        // A channel's sender and receiver polled in one future: the send
        // wakes the receiver, which is the future itself.
        let (tx, mut rx) = futures::channel::mpsc::unbounded::<u8>();
        let mut sent = false;
        let mut both = std::pin::pin!(quietly(poll_fn(move |cx| {
            use futures::Stream;
            let got = std::pin::Pin::new(&mut rx).poll_next(cx);
            if !sent {
                sent = true;
                tx.unbounded_send(7).unwrap();
            }
            got
        })));
        assert_eq!(both.as_mut().poll(&mut cx), Poll::Ready(Some(7)));
        assert_eq!(count.0.load(Ordering::SeqCst), 0, "the task was not woken");
    }
}
