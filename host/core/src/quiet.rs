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
use std::sync::atomic::{AtomicU8, Ordering};
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
        state: AtomicU8::new(IDLE),
    });
    let waker = Waker::from(shared.clone());
    poll_fn(move |cx| {
        shared.task.register(cx.waker());
        let mut own = Context::from_waker(&waker);
        for _ in 0..ROUNDS {
            shared.state.store(POLLING, Ordering::SeqCst);
            let polled = poll(&mut own);
            // One step: a wake-up lands before it (noted: another round)
            // or after it (it wakes the task).
            let woken = shared.state.swap(IDLE, Ordering::SeqCst) == WOKEN;
            if polled.is_ready() {
                return polled;
            }
            if !woken {
                return Poll::Pending;
            }
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    })
}

/// [`Shared::state`]: not being polled ...
const IDLE: u8 = 0;
/// ... being polled ...
const POLLING: u8 = 1;
/// ... being polled, and woken meanwhile (to be polled again).
const WOKEN: u8 = 2;

struct Shared {
    task: AtomicWaker,
    /// [`IDLE`], [`POLLING`] or [`WOKEN`]: changed by one atomic step each
    /// way, so that a wake-up is either seen by the poll or wakes the task.
    state: AtomicU8,
}

impl Wake for Shared {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let noted = self
            .state
            .compare_exchange(POLLING, WOKEN, Ordering::SeqCst, Ordering::SeqCst);
        if noted == Err(IDLE) {
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

    /// A wake-up from another thread, landing anywhere around the end of a
    /// poll, is never lost: the part is polled again in that turn, or the
    /// task is woken. (The first version checked "being polled?" and then
    /// noted the wake-up in two steps: one landing between them, as the
    /// poll ended, was noted after the last look at it and never acted on;
    /// a connection so left waited for ever.)
    #[test]
    fn a_wake_up_from_another_thread_is_never_lost() {
        use std::sync::mpsc;
        use std::time::{Duration, Instant};
        // The waking thread: given a waker and how long to spin first.
        let (send, wakes) = mpsc::channel::<(Waker, u32)>();
        let (done, finished) = mpsc::channel::<()>();
        let waker_thread = std::thread::spawn(move || {
            for (waker, spin) in wakes {
                for _ in 0..spin {
                    std::hint::spin_loop();
                }
                waker.wake();
                done.send(()).unwrap();
            }
        });
        let started = Instant::now();
        let mut lost = 0;
        let mut rounds = 0u32;
        // Bounded in count and time (two cores: the spin ranges over the
        // poll's last instructions, where the race was).
        while rounds < 200_000 && started.elapsed() < Duration::from_secs(20) {
            rounds += 1;
            let count = Arc::new(Count(AtomicUsize::new(0)));
            let task = Waker::from(count.clone());
            let mut cx = Context::from_waker(&task);
            let spin = rounds % 64;
            let mut polls = 0;
            let send = send.clone();
            let mut part = std::pin::pin!(drive(move |cx| {
                polls += 1;
                if polls == 1 {
                    send.send((cx.waker().clone(), spin)).unwrap();
                    for _ in 0..32 {
                        std::hint::spin_loop();
                    }
                    return Poll::Pending;
                }
                Poll::Ready(())
            }));
            let polled = part.as_mut().poll(&mut cx);
            finished.recv().unwrap();
            if polled.is_pending() && count.0.load(Ordering::SeqCst) == 0 {
                lost += 1;
            }
        }
        drop(send);
        waker_thread.join().unwrap();
        assert_eq!(lost, 0, "{lost} of {rounds} wake-ups were lost");
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
