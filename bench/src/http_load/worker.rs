//! One load thread: opens its connections before the clock starts, then queues the requests as
//! they fall due (closed or open loop), polls its sockets, and counts what is still unanswered
//! when the drain time runs out.

use std::sync::Barrier;
use std::time::{Duration, Instant};

use mio::{Events, Poll, Token};

use super::conn::Conn;
use super::plan::{capped_secs, Plan, Tally};
use super::result::latency_histogram;

/// After the run's duration, how long requests already due may still complete. At the bound,
/// every request still unanswered (or due and never sent) is counted as an error.
pub const DRAIN_MAX: Duration = Duration::from_secs(2);
/// Time given to the first connects before the clock starts; connections still not open then
/// are opened during the run.
const SETUP_MAX: Duration = Duration::from_secs(2);
/// Readiness events taken per poll.
const LOAD_EVENTS_MAX: usize = 1024;
/// Open loop: closer than this to a due send, the thread polls without sleeping (yielding the
/// core to any other runnable thread between polls).
///
/// Rationale: epoll's timeout has millisecond resolution (mio rounds up), which would send
/// requests in bursts once per millisecond instead of evenly spaced. At more than ~1 000 requests
/// per second per thread the thread therefore polls all the time; it yields between polls so a
/// server sharing its core still runs.
const SPIN_BELOW: Duration = Duration::from_millis(1);

/// One thread: its connections, one poll, until the duration and the drain are over.
pub(super) fn worker(plan: &Plan<'_>, ids: &[usize], barrier: &Barrier) -> Tally {
    let mut tally =
        Tally { requests: 0, errors: 0, non_2xx: 0, latency_us: latency_histogram(), elapsed: Duration::ZERO };
    let mut poll = match Poll::new() {
        Ok(p) => p,
        Err(_) => {
            barrier.wait();
            tally.errors += ids.len() as u64;
            return tally;
        }
    };
    let mut events = Events::with_capacity(ids.len().clamp(1, LOAD_EVENTS_MAX));
    let mut conns: Vec<Conn> = ids.iter().map(|&id| Conn::new(id, plan.requests.len())).collect();

    // Open every connection before the clock starts.
    let setup_until = Instant::now() + SETUP_MAX;
    for (k, c) in conns.iter_mut().enumerate() {
        c.connect(plan, poll.registry(), Token(k), Instant::now(), &mut tally);
    }
    loop {
        let now = Instant::now();
        if now >= setup_until || !conns.iter().any(|c| c.stream.is_some() && !c.connected) {
            break;
        }
        if poll.poll(&mut events, Some(setup_until - now)).is_err() {
            break;
        }
        for ev in events.iter() {
            if let Some(c) = conns.get_mut(ev.token().0) {
                c.on_ready(plan, poll.registry(), &mut tally);
            }
        }
    }

    barrier.wait();
    let start = Instant::now();
    let deadline = start + plan.duration;
    let hard_stop = deadline + DRAIN_MAX;
    if let Some(o) = &plan.open {
        for c in &mut conns {
            c.next_due = start + capped_secs(c.id as f64 / o.rate_per_s, plan.cap);
        }
    }
    loop {
        let now = Instant::now();
        // Queue what is due, open what must be opened, and find the next time to wake.
        let mut wake = hard_stop;
        let mut send_wake: Option<Instant> = None;
        let mut busy = false;
        for (k, c) in conns.iter_mut().enumerate() {
            if !c.in_flight {
                match &plan.open {
                    None if now < deadline => c.queue(now, plan.requests.len()),
                    Some(o) if c.next_due < deadline => {
                        if c.next_due <= now {
                            let due = c.next_due;
                            c.next_due += o.interval;
                            // Waited for the server (its connection was busy when it fell due):
                            // from the due time; else only the client was late: from now.
                            let origin = if c.free_since > due { due } else { now };
                            c.queue(origin, plan.requests.len());
                        } else {
                            send_wake = Some(send_wake.map_or(c.next_due, |w| w.min(c.next_due)));
                        }
                    }
                    _ => {}
                }
            }
            if c.in_flight {
                busy = true;
                if c.stream.is_none() {
                    match c.retry_at {
                        Some(t) if t > now => wake = wake.min(t),
                        _ => c.connect(plan, poll.registry(), Token(k), now, &mut tally),
                    }
                }
                if c.connected {
                    c.pump_write(plan, poll.registry(), &mut tally);
                }
            }
        }
        let sending_done = match &plan.open {
            None => now >= deadline,
            Some(_) => send_wake.is_none(),
        };
        if sending_done && !busy {
            break;
        }
        if now >= hard_stop {
            for c in &conns {
                tally.errors += u64::from(c.in_flight);
                if let (Some(o), true) = (&plan.open, c.next_due < deadline) {
                    let missed = (deadline - c.next_due).as_nanos().div_ceil(o.interval.as_nanos().max(1));
                    tally.errors += u64::try_from(missed).unwrap_or(u64::MAX);
                }
            }
            break;
        }
        let mut timeout = wake.saturating_duration_since(now);
        if let Some(t) = send_wake {
            timeout = timeout.min(t.saturating_duration_since(now).saturating_sub(SPIN_BELOW));
        }
        if poll.poll(&mut events, Some(timeout)).is_err() {
            // EINTR and the like: go round again.
            continue;
        }
        if timeout.is_zero() && events.is_empty() {
            std::thread::yield_now();
        }
        for ev in events.iter() {
            if let Some(c) = conns.get_mut(ev.token().0) {
                c.on_ready(plan, poll.registry(), &mut tally);
            }
        }
    }
    tally.elapsed = start.elapsed();
    for c in &mut conns {
        c.close(poll.registry());
    }
    tally
}
