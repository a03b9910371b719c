//! `rampart deliver`: the cluster's delivery workers on the NATS firings stream, a storage
//! probe, and `/healthz` and `/metrics` for this process.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use rampart_cluster::health::WorkerStats;
use rampart_cluster::worker::{DeliveryWorker, WorkerStores};
use rampart_cluster::BusNames;
use rampart_delivery::DeliveryConfig;
use rampart_state::clock::{self, SharedClock};
use rampart_store::store::{Store, StoreLocation};

use crate::cli::DeliverArgs;
use crate::config::{load_file, telegram};
use crate::serve::process::bind;
use crate::signal::stop_signal;

/// `rampart deliver`: worker threads on the firings stream until SIGTERM or Ctrl-C.
pub(crate) fn run(args: DeliverArgs) -> Result<()> {
    let file = load_file(&args.common)?;
    let Some(url) = args.common.postgres.clone() else {
        bail!("deliver needs --postgres: the database `serve --postgres --nats` records firings in");
    };
    if !(1..=64).contains(&args.workers) {
        bail!("--workers must be 1 to 64");
    }
    let at = StoreLocation::Postgres(url);
    let config = DeliveryConfig {
        allow_private: file.webhooks.allow_private,
        telegram: telegram(&file)?,
        ..DeliveryConfig::default()
    };
    let clock = clock::system();
    let listener = bind(&args.listen, false).with_context(|| format!("binding {}", args.listen))?;
    let stats = Arc::new(WorkerStats::new(args.workers));
    let mut workers = Vec::with_capacity(args.workers);
    for _ in 0..args.workers {
        let open = || -> Result<Store> {
            Ok(at.open().with_context(|| format!("opening {}", at.describe()))?.for_background()?)
        };
        let stores = WorkerStores { reader: open()?, recorder: open()? };
        let (nats, names, config, clock, stats) =
            (args.nats.clone(), BusNames::default(), config.clone(), clock.clone(), stats.clone());
        workers.push(DeliveryWorker::start(stores, nats, names, config, clock, stats)?);
    }
    let _probe =
        storage_probe(at.open().with_context(|| format!("opening {}", at.describe()))?, stats.clone(), clock.clone())?;
    {
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        writeln!(
            out,
            "delivering with {} workers; /healthz and /metrics on {}",
            workers.len(),
            listener.local_addr()?
        )?;
        out.flush()?;
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        tokio::select! {
            () = rampart_cluster::health::serve(listener, stats) => {}
            stopped = stop_signal() => stopped?,
        }
        Ok::<(), anyhow::Error>(())
    })?;
    tracing::info!("deliver: stopping");
    // A worker waiting on a NATS server that is gone may not see its stop flag soon; the
    // process does not wait for it longer than this (firings in hand go to other workers after
    // the ack wait; every recorded outcome is already committed).
    let (stopped, wait) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(workers);
        let _ = stopped.send(());
    });
    if wait.recv_timeout(Duration::from_secs(5)).is_err() {
        tracing::warn!("deliver: workers did not stop within 5 s; exiting anyway");
    }
    Ok(())
}

/// `rampart deliver`'s check of PostgreSQL: a write every second, so `/healthz` says when the
/// database is away even while no firing needs it (the workers' own calls count too).
fn storage_probe(
    mut store: Store,
    stats: Arc<WorkerStats>,
    clock: SharedClock,
) -> std::io::Result<rampart_state::shutdown::StoppableThread> {
    rampart_state::shutdown::StoppableThread::spawn("deliver-probe", move |stop| {
        let mut was_ok = true;
        while !stop.load(std::sync::atomic::Ordering::Acquire) {
            let now = clock.now_ms();
            let result = store.probe_write(now);
            if result.is_ok() != was_ok {
                match &result {
                    Ok(()) => tracing::info!("deliver: storage answers again"),
                    Err(e) => tracing::warn!("deliver: storage cannot be written: {e}"),
                }
                was_ok = result.is_ok();
            }
            stats.storage(result.is_ok(), now);
            std::thread::sleep(Duration::from_secs(1));
        }
    })
}
