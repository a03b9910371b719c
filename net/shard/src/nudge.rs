//! Wakes each shard executor from outside every [`NUDGE_PERIOD`], so a shard can never stay
//! parked while it has work, and a stop is seen at once.
//!
//! Why: glommio 0.9's executor loop parks whenever `run_task_queues` returns false, and that
//! function also returns false when the preemption flag is already set on entry, before it has
//! run anything, with tasks still runnable. Parked like that, the executor waits in
//! `io_uring_enter` for a completion that is not coming (the runnable task's timer has already
//! fired), so the shard stops applying ticks and never sees its stop command: the shutdown hang
//! found after 77 minutes of the simulated market. With a 50 µs preemption timer the hang
//! happens within seconds (the test below). A wake from another thread writes the executor's
//! eventfd, which ends the park; the executor installs a fresh preemption timer and runs its
//! queues again. The nudge task itself does nothing but be woken.
//!
//! Limit: the wake helps because the fresh timer (glommio's default 100 ms, which the shards
//! keep) outlasts the step from installing it to running the queues. A timer shorter than that
//! step (10 µs in a debug build) expires again before every run, and the executor parks again
//! at every wake; so the test uses 50 µs, where the race is frequent but each wake recovers.
//!
//! Cost: one wake per shard per period from the `shard-nudge` thread, off the tick path.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often every shard executor is woken from outside: the longest a shard can stay parked
/// with runnable work.
pub const NUDGE_PERIOD: Duration = Duration::from_millis(100);

/// One executor's wake-up point: the waker of its nudge task.
#[derive(Debug, Default)]
pub struct Nudge {
    waker: Mutex<Option<Waker>>,
    pending: AtomicBool,
}

impl Nudge {
    /// Wakes the executor's nudge task (from any thread).
    pub fn wake(&self) {
        self.pending.store(true, Ordering::Release);
        let guard = self.waker.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(w) = guard.as_ref() {
            w.wake_by_ref();
        }
    }

    /// The executor's side: a task that waits to be woken, for ever. Spawn it on the executor.
    pub async fn serve(self: Arc<Nudge>) {
        loop {
            Woken(&self).await;
        }
    }
}

/// Ready once [`Nudge::wake`] has been called since the last time.
struct Woken<'a>(&'a Nudge);

impl Future for Woken<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0.pending.swap(false, Ordering::AcqRel) {
            return Poll::Ready(());
        }
        {
            let mut guard = self.0.waker.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if !guard.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *guard = Some(cx.waker().clone());
            }
        }
        // A wake between the swap and the registration is not lost.
        if self.0.pending.swap(false, Ordering::AcqRel) {
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

/// The thread that wakes every executor each [`NUDGE_PERIOD`] until stopped.
pub struct Nudger {
    nudges: Vec<Arc<Nudge>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Nudger {
    /// Starts waking `nudges`.
    pub fn start(nudges: Vec<Arc<Nudge>>) -> std::io::Result<Nudger> {
        let stop = Arc::new(AtomicBool::new(false));
        let (n, s) = (nudges.clone(), stop.clone());
        let thread = std::thread::Builder::new().name("shard-nudge".into()).spawn(move || {
            while !s.load(Ordering::Acquire) {
                std::thread::sleep(NUDGE_PERIOD);
                n.iter().for_each(|x| x.wake());
            }
        })?;
        Ok(Nudger { nudges, stop, thread: Some(thread) })
    }

    /// Wakes every executor now (after a stop command, so it is seen at once).
    pub fn wake_all(&self) {
        self.nudges.iter().for_each(|x| x.wake());
    }

    /// Stops the thread.
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use glommio::{LocalExecutorBuilder, Placement};
    use std::sync::atomic::AtomicU64;
    use std::time::Instant;

    /// A loop shaped like a shard's (some work, then a 1 ms timer) on an executor whose 50 µs
    /// preemption timer makes glommio's lost-park race frequent: without nudges it hung for good
    /// in 4 of 6 runs here within 6 s; with them it kept going in every run, also beside two CPU
    /// hogs. The check is for a hang (no progress at all for 3 s), not for speed.
    #[test]
    fn a_nudged_executor_never_stays_parked_with_work() {
        let count = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let nudge = Arc::new(Nudge::default());
        let (c, s, n) = (count.clone(), stop.clone(), nudge.clone());
        let executor = LocalExecutorBuilder::new(Placement::Unbound)
            .preempt_timer(Duration::from_micros(50))
            .spawn(move || async move {
                glommio::spawn_local(n.serve()).detach();
                while !s.load(Ordering::Acquire) {
                    let t = Instant::now();
                    while t.elapsed() < Duration::from_micros(50) {}
                    c.fetch_add(1, Ordering::Relaxed);
                    glommio::timer::sleep(Duration::from_millis(1)).await;
                }
            })
            .expect("start an executor");
        let nudger = Nudger::start(vec![nudge]).expect("start the nudger");
        let (mut last, mut still_since) = (0, Instant::now());
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(6) {
            std::thread::sleep(Duration::from_millis(50));
            let n = count.load(Ordering::Relaxed);
            if n != last {
                (last, still_since) = (n, Instant::now());
            }
            assert!(still_since.elapsed() < Duration::from_secs(3), "the executor hung at {n} rounds");
        }
        stop.store(true, Ordering::Release);
        nudger.wake_all();
        executor.join().expect("the executor stops");
        nudger.stop();
    }
}
