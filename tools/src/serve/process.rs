//! What every serving process does, whatever its role: prints its first key and the bound
//! addresses, configures the front, binds a listener, and serves HTTP until a stop signal.

use std::rc::Rc;
use std::sync::Arc;

use anyhow::Result;
use arc_swap::ArcSwap;
use rampart_net::api::front::{self, Front, FrontBuilder, FrontConfig, Fronts};
use rampart_net::api::metrics::Metrics;
use rampart_net::board::BoardThread;
use rampart_state::board::Board;
use rampart_state::clock::SharedClock;
use rampart_state::shutdown::Shutdown;
use rampart_store::store::Store;

use super::settings::ServeSettings;

/// Prints the first key (only when the database has no account yet and `first_key`, which a
/// market node, serving no API, does not ask for; made after the port is bound, so a start that
/// cannot bind loses none) and the bound addresses.
pub(crate) fn announce(
    store: &mut Store,
    listener: &std::net::TcpListener,
    metrics: Option<&std::net::TcpListener>,
    now_ms: i64,
    first_key: bool,
) -> Result<()> {
    use std::io::Write as _;
    if first_key && store.account_count()? == 0 {
        let k = store.create_account_with_key("developer", Some("first start"), now_ms)?;
        println!("api key: {}", k.key);
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "listening on {}", listener.local_addr()?)?;
    if let Some(m) = metrics {
        writeln!(out, "metrics on {}", m.local_addr()?)?;
    }
    out.flush()?;
    Ok(())
}

/// The front's settings every role shares.
pub(crate) fn configured(
    front: FrontBuilder,
    s: &ServeSettings,
    metrics: Arc<Metrics>,
    metrics_apart: bool,
    clock: &SharedClock,
    board: Arc<ArcSwap<Board>>,
) -> FrontBuilder {
    front
        .with_metrics(metrics, metrics_apart)
        .with_build(env!("CARGO_PKG_VERSION"), env!("RAMPART_REVISION"))
        .with_unauthenticated_per_min(s.unauthenticated_per_min)
        .with_stream_bounds(s.stream_bounds)
        .with_clock(clock.clone())
        .with_board(board)
        .with_telegram(s.telegram.is_some())
        .with_previous_secret_ms(i64::from(s.previous_secret_s) * 1000)
}

/// Serves HTTP on `threads` front threads until a stop signal, then starts the stop sequence with
/// its first stage: the connections (whose tasks hold the fronts, and with them the storage
/// thread's handles) and the board thread end. The calling thread is the first front (it also
/// serves `/metrics` and waits for the signals); each other runs its own runtime, accepting on
/// the same listening socket (or, with `reuseport`, on its own socket bound to the same address
/// with `SO_REUSEPORT`, the kernel spreading new connections over them), and stops when told. Every later stage is told to stop in a way
/// that wakes it; whatever does not finish within the grace period is named in the log and the
/// process ends anyway.
pub(crate) fn serve_until_stopped(
    listener: std::net::TcpListener,
    metrics_listener: Option<std::net::TcpListener>,
    fronts: Arc<Fronts>,
    threads: usize,
    reuseport: bool,
    config: FrontConfig,
    board_thread: BoardThread,
) -> Result<(Result<()>, Shutdown)> {
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut others = Vec::with_capacity(threads.saturating_sub(1));
    for i in 1..threads {
        let own = if reuseport { bind_one(listener.local_addr()?, true)? } else { listener.try_clone()? };
        let (listener, fronts, config, stopped) = (own, fronts.clone(), config.clone(), stopped.clone());
        let thread = std::thread::Builder::new()
            .name(format!("front-{i}"))
            .spawn(move || front_thread(i, listener, &fronts, config, stopped))?;
        others.push(thread);
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let local = tokio::task::LocalSet::new();
    let front = Rc::new(fronts.front(0));
    let served = local.block_on(&runtime, run_front(listener, metrics_listener, front, config));
    tracing::info!("shutting down");
    let watch = Shutdown::start_for_process()?;
    watch.stage("closing HTTP connections");
    let _ = stop.send(true);
    drop(local);
    for t in others {
        if let Ok(Err(e)) = t.join() {
            tracing::warn!("a front thread: {e:#}");
        }
    }
    drop(board_thread);
    drop(runtime);
    Ok((served, watch))
}

/// Front thread `index` (1 and up): its own runtime and [`Front`], accepting on `listener` (the API's
/// socket, shared) until `stopped` says so; its connections end with it.
fn front_thread(
    index: usize,
    listener: std::net::TcpListener,
    fronts: &Fronts,
    config: FrontConfig,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let local = tokio::task::LocalSet::new();
    let front = Rc::new(fronts.front(index));
    local.block_on(&runtime, async move {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let stop = async move {
            let _ = stopped.wait_for(|s| *s).await;
        };
        front::serve(listener, front, config, front::Role::Api, stop).await;
        Ok::<_, anyhow::Error>(())
    })?;
    drop(local);
    Ok(())
}

/// Serves HTTP until SIGTERM or SIGINT. SIGHUP (a closed terminal, a reload habit) is logged
/// and otherwise ignored: settings are read once at start, so there is nothing to reload, and
/// hanging up must not stop the service.
async fn run_front(
    listener: std::net::TcpListener,
    metrics: Option<std::net::TcpListener>,
    front: Rc<Front>,
    config: FrontConfig,
) -> Result<()> {
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let (stop_metrics, metrics_stopped) = tokio::sync::oneshot::channel::<()>();
    if let Some(m) = metrics {
        let (m, front, config) = (tokio::net::TcpListener::from_std(m)?, front.clone(), config.clone());
        tokio::task::spawn_local(async move {
            front::serve(m, front, config, front::Role::Metrics, async {
                let _ = metrics_stopped.await;
            })
            .await;
        });
    }
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut hup = signal(SignalKind::hangup())?;
    let shutdown = async move {
        loop {
            tokio::select! {
                _ = term.recv() => break,
                _ = tokio::signal::ctrl_c() => break,
                _ = hup.recv() => tracing::info!("SIGHUP: settings are read only at start, nothing to reload; still running"),
            }
        }
    };
    front::serve(listener, front, config, front::Role::Api, shutdown).await;
    let _ = stop_metrics.send(());
    Ok(())
}

/// Connections the kernel holds for the front, handshaken and not yet accepted (the kernel caps it
/// at `net.core.somaxconn`, 4 096 by default). The standard library's `bind` asks for 128: a burst
/// of a thousand stream clients then overflowed it, and each SYN dropped waited a second for the
/// client's retransmission (issue #47: 21 to 243 of 1 000 handshakes took ~1 s).
pub(crate) const LISTEN_BACKLOG: i32 = 4_096;

/// A non-blocking listener on `address` (the first of its addresses that binds), with
/// `SO_REUSEADDR` as the standard library sets it, `SO_REUSEPORT` when asked (`--accept
/// reuseport`: the other front threads then bind their own sockets to the same address), and a
/// backlog of [`LISTEN_BACKLOG`] per socket.
pub(crate) fn bind(address: &str, reuseport: bool) -> std::io::Result<std::net::TcpListener> {
    use std::net::ToSocketAddrs;
    let mut last = std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("no address in {address}"));
    for addr in address.to_socket_addrs()? {
        match bind_one(addr, reuseport) {
            Ok(listener) => return Ok(listener),
            Err(e) => last = e,
        }
    }
    Err(last)
}

fn bind_one(addr: std::net::SocketAddr, reuseport: bool) -> std::io::Result<std::net::TcpListener> {
    let socket = socket2::Socket::new(socket2::Domain::for_address(addr), socket2::Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    if reuseport {
        socket.set_reuse_port(true)?;
    }
    socket.bind(&addr.into())?;
    socket.listen(LISTEN_BACKLOG)?;
    let listener = std::net::TcpListener::from(socket);
    listener.set_nonblocking(true)?;
    Ok(listener)
}
