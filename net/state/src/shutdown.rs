//! A bound on shutdown: the stop sequence names each stage as it starts, and a watchdog thread
//! ends the process if the sequence has not finished within the grace period, with a log line
//! that names the stage it was stuck in.
//!
//! Rationale: a thread that does not see its stop (a shard executor parked in the kernel, a
//! join on a thread that waits for I/O that never completes) must not keep a server that was
//! told to stop running for ever. Nothing acknowledged is lost by ending then: alerts are
//! committed before they are acknowledged, and a firing that was not yet recorded leaves its
//! alert active, so it fires again after the restart (at least once).

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long the stop sequence may take before the process is ended.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

#[derive(Debug, Default)]
struct State {
    stage: &'static str,
    done: bool,
}

/// What the watchdog does when the grace period ends first: given the stage it was stuck in.
pub type OnOverrun = Box<dyn FnOnce(&'static str) + Send>;

/// The watched stop sequence.
pub struct Shutdown {
    state: Arc<(Mutex<State>, Condvar)>,
    watchdog: Option<JoinHandle<()>>,
}

impl Shutdown {
    /// Starts watching: if [`Shutdown::finish`] is not called within `grace`, `on_overrun` runs
    /// on the watchdog thread with the current stage.
    pub fn start(grace: Duration, on_overrun: OnOverrun) -> std::io::Result<Shutdown> {
        let state = Arc::new((Mutex::new(State { stage: "starting to stop", done: false }), Condvar::new()));
        let watched = state.clone();
        let watchdog = std::thread::Builder::new().name("shutdown-watchdog".into()).spawn(move || {
            let deadline = Instant::now() + grace;
            let (lock, cvar) = &*watched;
            let mut s = lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            while !s.done {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    let stage = s.stage;
                    drop(s);
                    on_overrun(stage);
                    return;
                }
                s = cvar.wait_timeout(s, left).unwrap_or_else(std::sync::PoisonError::into_inner).0;
            }
        })?;
        Ok(Shutdown { state, watchdog: Some(watchdog) })
    }

    /// Starts watching with the process's own policy: past [`SHUTDOWN_GRACE`], log the stage
    /// that did not finish and exit with status 1.
    pub fn start_for_process() -> std::io::Result<Shutdown> {
        Shutdown::start(
            SHUTDOWN_GRACE,
            Box::new(|stage| {
                tracing::error!(
                    "shutdown did not finish within {} s: abandoned while {stage}; exiting now",
                    SHUTDOWN_GRACE.as_secs()
                );
                std::process::exit(1);
            }),
        )
    }

    /// Names the stage that starts now.
    pub fn stage(&self, stage: &'static str) {
        let (lock, _) = &*self.state;
        lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner).stage = stage;
    }

    /// The sequence has finished: the watchdog stands down.
    pub fn finish(mut self) {
        let (lock, cvar) = &*self.state;
        lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner).done = true;
        cvar.notify_all();
        if let Some(t) = self.watchdog.take() {
            let _ = t.join();
        }
    }
}

/// A background thread that runs until told to stop: it is given a flag to poll, and dropping
/// its handle raises the flag and joins it.
#[derive(Debug)]
pub struct StoppableThread {
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl StoppableThread {
    /// Spawns `name` running `body`, which must return soon after the flag it is given is set.
    pub fn spawn(
        name: &str,
        body: impl FnOnce(Arc<std::sync::atomic::AtomicBool>) + Send + 'static,
    ) -> std::io::Result<StoppableThread> {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new().name(name.into()).spawn(move || body(flag))?;
        Ok(StoppableThread { stop, thread: Some(thread) })
    }
}

impl Drop for StoppableThread {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn a_finished_sequence_is_not_abandoned() {
        let (tx, rx) = mpsc::channel();
        let s = Shutdown::start(
            Duration::from_secs(30),
            Box::new(move |stage| {
                let _ = tx.send(stage);
            }),
        )
        .expect("start the watchdog");
        s.stage("stopping the shards");
        s.finish();
        assert!(rx.recv_timeout(Duration::from_millis(100)).is_err(), "no overrun reported");
    }

    #[test]
    fn an_overrun_names_the_stuck_stage() {
        let (tx, rx) = mpsc::channel();
        let s = Shutdown::start(
            Duration::from_millis(50),
            Box::new(move |stage| {
                let _ = tx.send(stage);
            }),
        )
        .expect("start the watchdog");
        s.stage("stopping the writer");
        let stage = rx.recv_timeout(Duration::from_secs(10)).expect("the overrun is reported");
        assert_eq!(stage, "stopping the writer");
        s.finish();
    }
}
