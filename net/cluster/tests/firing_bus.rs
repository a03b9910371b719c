//! The firings stream against a real `nats-server` with JetStream (Debian's, started by the test
//! on a loopback port): a firing published twice under its (alert, time) id is stored once; each
//! firing goes to one of the workers sharing the consumer; one whose worker dies unanswered is
//! redelivered after the ack wait; a retry comes back after its delay, not before; a firing is
//! delivered `DELIVERIES_MAX` times at most; more than a thousand firings waiting for their retry
//! do not stall the consumer, and a consumer made before that was set is updated; a firing's
//! delivery carried in its message reaches the worker whole, at every delivery.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rampart_cluster::{wire, BusNames, FiringBus, Outgoing, DELIVERIES_MAX, UNANSWERED_MAX};
use rampart_store::store::message_id;

fn names(test: &str) -> BusNames {
    BusNames {
        stream: format!("T_{test}"),
        subject_root: format!("t.{test}.firings"),
        consumer: format!("delivery_{test}"),
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime")
}

/// Connects as the publisher and the workers do: a refused or timed-out attempt is tried again
/// (they retry until the server answers; under a loaded CI machine the shared server's JetStream
/// can take longer than a request's 5 s to make a stream), up to 60 s.
async fn bus(test: &str) -> FiringBus {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        match FiringBus::connect(&rampart_testkit::nats::server().url(), names(test)).await {
            Ok(bus) => return bus,
            Err(e) if std::time::Instant::now() < deadline => {
                eprintln!("connect: {e}; trying again");
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
            Err(e) => panic!("connect: {e}"),
        }
    }
}

#[test]
fn a_firing_published_twice_is_stored_once() {
    runtime().block_on(async {
        let bus = bus("dup").await;
        let id = message_id(7, 1_000);
        let first = bus.publish("webhook", &id, b"a".to_vec()).await.expect("publish");
        let again = bus.publish("webhook", &id, b"a".to_vec()).await.expect("publish again");
        assert!(!first.duplicate);
        assert!(again.duplicate, "the same (alert, time) is a repeat");
        assert_eq!(again.sequence, first.sequence);
        let other = bus.publish("webhook", &message_id(7, 1_001), b"b".to_vec()).await.expect("another time");
        assert!(!other.duplicate);
        let worker = bus.worker(Duration::from_secs(5)).await.expect("worker");
        let mut ids = Vec::new();
        while let Some(f) = worker.next(Duration::from_millis(300)).await.expect("next") {
            ids.push(f.id.clone());
            f.done().await.expect("ack");
        }
        assert_eq!(ids, ["7:1000", "7:1001"]);
    });
}

#[test]
fn each_firing_goes_to_one_worker_and_an_unanswered_one_comes_back() {
    runtime().block_on(async {
        let (a, b) = (bus("share").await, bus("share").await);
        for i in 0..10 {
            a.publish("webhook", &message_id(i, 5_000), format!("{i}").into_bytes()).await.expect("publish");
        }
        let ack_wait = Duration::from_secs(1);
        let (wa, wb) = (a.worker(ack_wait).await.expect("worker a"), b.worker(ack_wait).await.expect("worker b"));
        // Worker a takes one and dies without answering.
        let lost = wa.next(Duration::from_secs(2)).await.expect("next").expect("a firing");
        let lost_id = lost.id.clone();
        drop((lost, wa, a));
        let started = Instant::now();
        let mut seen: BTreeMap<String, Vec<i64>> = BTreeMap::new();
        while seen.len() < 10 || !seen.get(&lost_id).is_some_and(|v| v.contains(&2)) {
            assert!(started.elapsed() < Duration::from_secs(10), "not all delivered: {seen:?}");
            let Some(f) = wb.next(Duration::from_millis(500)).await.expect("next") else { continue };
            seen.entry(f.id.clone()).or_default().push(f.attempt);
            f.done().await.expect("ack");
        }
        assert!(started.elapsed() >= ack_wait / 2, "redelivered before the ack wait");
        for (id, attempts) in &seen {
            let want: &[i64] = if *id == lost_id { &[2] } else { &[1] };
            assert_eq!(attempts, want, "firing {id}");
        }
        assert!(wb.next(Duration::from_millis(300)).await.expect("next").is_none(), "nothing more");
    });
}

/// The delivery a publisher puts in a firing's message reaches the worker as it was written, at
/// its first delivery and at a redelivery (which the worker tells by `attempt`); a message
/// without one has none.
#[test]
fn a_delivery_carried_in_its_message_reaches_the_worker() {
    runtime().block_on(async {
        let bus = bus("carried").await;
        let d = wire::Delivery {
            id: 12,
            account_id: 3,
            alert_id: 7,
            trigger_ms: 2_000,
            url: "https://example.com/h".into(),
            body: "{\"note\":\"é\"}".into(),
        };
        let with =
            Outgoing { leaf: "webhook", id: message_id(7, 2_000), body: b"12".to_vec(), delivery: wire::delivery(&d) };
        let without = Outgoing { leaf: "webhook", id: message_id(8, 2_000), body: b"13".to_vec(), delivery: None };
        assert_eq!(bus.publish_batch(vec![with, without]).await, [true, true]);
        let worker = bus.worker(Duration::from_secs(30)).await.expect("worker");
        let first = worker.next_batch(2, Duration::from_secs(2)).await.expect("next");
        assert_eq!(first.len(), 2);
        assert_eq!((first[0].attempt, first[0].delivery()), (1, Some(Ok(d.clone()))));
        assert!(first[1].delivery().is_none(), "a message without a delivery");
        let mut first = first.into_iter();
        let carried = first.next().expect("the first");
        carried.retry_in(Duration::from_millis(50)).await.expect("nak");
        first.next().expect("the second").done().await.expect("ack");
        let asked = Instant::now();
        let again = loop {
            if let Some(f) = worker.next(Duration::from_millis(500)).await.expect("next") {
                break f;
            }
            assert!(asked.elapsed() < Duration::from_secs(10), "the retry never came");
        };
        assert_eq!((again.attempt, again.delivery()), (2, Some(Ok(d))), "redelivered whole; the worker reads the row");
        again.done().await.expect("ack");
    });
}

#[test]
fn a_retry_comes_back_after_its_delay_and_deliveries_are_bounded() {
    runtime().block_on(async {
        let bus = bus("retry").await;
        bus.publish("telegram", "telegram:1", b"x".to_vec()).await.expect("publish");
        let worker = bus.worker(Duration::from_secs(30)).await.expect("worker");
        let delay = Duration::from_millis(150);
        for attempt in 1..=DELIVERIES_MAX {
            let asked = Instant::now();
            let f = loop {
                if let Some(f) = worker.next(Duration::from_millis(200)).await.expect("next") {
                    break f;
                }
                assert!(asked.elapsed() < Duration::from_secs(5), "attempt {attempt} never came");
            };
            assert_eq!(f.attempt, attempt);
            if attempt > 1 {
                assert!(asked.elapsed() >= delay - Duration::from_millis(50), "attempt {attempt} came early");
            }
            f.retry_in(delay).await.expect("nak");
        }
        // After the last, the stream gives up on it.
        let started = Instant::now();
        while started.elapsed() < delay * 4 {
            assert!(worker.next(Duration::from_millis(200)).await.expect("next").is_none(), "a fourth delivery");
        }
    });
}

#[test]
fn firings_waiting_for_their_retry_do_not_stall_the_consumer() {
    // Issue #36: JetStream counts a firing asked again after a delay as unanswered. Under the
    // server's default cap (1 000), one account's 1 100 failing receivers, each waiting for its
    // next attempt, stopped the consumer: no other firing came until their retries were due.
    runtime().block_on(async {
        let bus = bus("stall").await;
        let failing = 1_100;
        for i in 0..failing {
            bus.publish("webhook", &message_id(i, 9_000), b"f".to_vec()).await.expect("publish");
        }
        let worker = bus.worker(Duration::from_secs(30)).await.expect("worker");
        let mut asked_again = 0;
        let started = Instant::now();
        while asked_again < failing {
            assert!(started.elapsed() < Duration::from_secs(20), "only {asked_again} of {failing} came");
            for f in worker.next_batch(100, Duration::from_millis(500)).await.expect("fetch") {
                f.retry_in(Duration::from_secs(60)).await.expect("nak");
                asked_again += 1;
            }
        }
        let healthy = message_id(1_000_000, 9_000);
        bus.publish("webhook", &healthy, b"h".to_vec()).await.expect("publish");
        let f =
            worker.next(Duration::from_secs(2)).await.expect("next").expect("another account's firing comes at once");
        assert_eq!(f.id, healthy);
        f.done().await.expect("ack");
    });
}

#[test]
fn a_consumer_made_with_the_servers_default_cap_is_updated() {
    runtime().block_on(async {
        let bus = bus("upgrade").await;
        let n = names("upgrade");
        let client = async_nats::connect(rampart_testkit::nats::server().url()).await.expect("connect");
        let js = async_nats::jetstream::new(client);
        let stream = js.get_stream(&n.stream).await.expect("the stream");
        let old = async_nats::jetstream::consumer::pull::Config {
            durable_name: Some(n.consumer.clone()),
            ack_policy: async_nats::jetstream::consumer::AckPolicy::Explicit,
            ack_wait: Duration::from_secs(30),
            max_deliver: DELIVERIES_MAX,
            ..Default::default()
        };
        let mut made = stream.create_consumer(old).await.expect("an older version's consumer");
        let before = made.info().await.expect("info").config.max_ack_pending;
        assert_ne!(before, UNANSWERED_MAX, "the server's default");
        bus.publish("webhook", &message_id(1, 1), b"x".to_vec()).await.expect("publish");
        let worker = bus.worker(Duration::from_secs(30)).await.expect("worker");
        let after = made.info().await.expect("info").config.max_ack_pending;
        assert_eq!(after, UNANSWERED_MAX, "updated from {before}");
        let f = worker.next(Duration::from_secs(2)).await.expect("next").expect("the firing");
        f.done().await.expect("ack");
    });
}
