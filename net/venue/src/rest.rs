//! The venue REST thread: instrument listings (at start and every refresh period), candle
//! backfill for every book, and Binance depth snapshots for the shards, paced within each
//! venue's published limits, off the tick path.
//!
//! Shards queue jobs ([`RestJob`]) on one bounded queue and take their answers from their own
//! bounded reply queue. The thread runs a single-threaded tokio runtime with hyper as the HTTP/1.1
//! client (rustls for https, the same configuration as webhook delivery).
//!
//! Bounds and behaviour at the bound:
//! - the job queue holds [`JOBS_MAX`]; a shard whose job does not fit keeps it and asks again
//!   on a later round (backpressure, nothing lost);
//! - at most [`IN_FLIGHT_PER_VENUE_MAX`] requests per venue at once; further jobs wait;
//! - a reply queue holds [`REPLIES_MAX`]; replies that do not fit wait on the thread, in order;
//! - a body is read up to [`REST_ANSWER_BYTES_MAX`]; a longer one is an error;
//! - a backfill page that fails is retried [`BACKFILL_ATTEMPTS_MAX`] times with growing delays,
//!   then the book is reported failed (it starts with the candles its trades build);
//! - every request waits for its venue's weight budget ([`super::VenueSettings::rest_weight_per_s`]);
//!   a 429, 418 or 403 answer pauses the venue for its `Retry-After` (or 60 s), at most the
//!   venue's `retry_after_max_s` whatever the venue says; during a 429 or 403 pause longer than
//!   [`PROBE_EVERY`] one request goes every [`PROBE_EVERY`], and the first that is answered
//!   ends the pause, so a venue that recovers before its word is used again within that (the
//!   bound on how long a book waits for its snapshot, not the venue's `Retry-After`); a 418 (an
//!   IP ban) is waited out, up to `retry_after_max_s`;
//! - one book's whole backfill (every timeframe, every page, every retry) gets
//!   [`BACKFILL_BOOK_TIMEOUT`]; after it the book is reported failed and its shard asks again
//!   later, with backoff, forever;
//! - a job task that ends without an answer (a panic) still answers: its slot is released and
//!   the shard gets a failure, so the book is asked again rather than forgotten;
//! - the listing at start asks every venue at once and waits [`LISTING_START_TIMEOUT`] at most;
//!   refreshes are judged by [`super::listing::ListingWatch`] before anything is delisted.

use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use bytes::Bytes;
use crossbeam_queue::ArrayQueue;
use http_body_util::{BodyExt, Limited};
use hyper::Method;
use rampart_engine::candle::{CandleSet, Timeframe};
use rampart_engine::instrument::Status;
use rampart_engine::{BookId, Registry, Venue};
use tokio::sync::Notify;

use super::binance;
use super::listing::{ListingChange, ListingWatch};
use super::pacer::Pacer;
pub use super::pacer::{PROBE_EVERY, RETRY_AFTER_MAX};
use super::{drop_collisions, with_protocol, CandlePage, Listed, RestApi, RestError, VenueSettings};
use rampart_outbound::{http, ssrf};
use rampart_state::RestStats;

/// Jobs waiting for the REST thread at most.
pub const JOBS_MAX: usize = 4096;
/// Replies waiting for one shard at most.
pub const REPLIES_MAX: usize = 1024;
/// An open-interest poll is skipped while the venue's next request slot is further than this.
pub const OI_POLL_SLACK: Duration = Duration::from_secs(1);
/// Requests in flight per venue at most.
pub const IN_FLIGHT_PER_VENUE_MAX: usize = 4;
/// Bytes of a REST body at most (Binance's full `exchangeInfo` is several MB).
pub const REST_ANSWER_BYTES_MAX: usize = 64 << 20;
/// Time allowed for one request: resolve, connect, TLS, send and the whole answer.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Time allowed for one book's whole backfill.
pub const BACKFILL_BOOK_TIMEOUT: Duration = Duration::from_secs(45);
/// Time allowed for the perpetual listings at start (every venue at once); a venue whose
/// perpetuals have not been listed by then runs without them (reported).
pub const PERP_LISTING_START_TIMEOUT: Duration = Duration::from_secs(10);
/// Time allowed for the listing of every venue at start; a venue that has not answered by then
/// is left out (reported).
pub const LISTING_START_TIMEOUT: Duration = Duration::from_secs(15);
/// Attempts per backfill page at most.
pub const BACKFILL_ATTEMPTS_MAX: u32 = 4;
/// Pages fetched per (book, timeframe) at most.
pub const BACKFILL_PAGES_MAX: usize = 8;
/// Pause of a venue after a rate-limit answer without `Retry-After`.
pub const RATE_LIMIT_PAUSE: Duration = Duration::from_secs(60);

/// Work a shard asks of the REST thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestJob {
    /// Fetch the candle history of a book.
    Backfill {
        /// The book.
        book: BookId,
    },
    /// Fetch a depth snapshot (Binance).
    Snapshot {
        /// The book.
        book: BookId,
    },
    /// Poll the open interest of a book's Binance perpetual (decisions §17).
    PerpOi {
        /// The book.
        book: BookId,
        /// The contract.
        contract: ContractName,
    },
    /// Poll the funding of every perpetual of a venue (OKX: `crate::perp_funding`).
    PerpFunding {
        /// The venue.
        venue: Venue,
    },
}

/// A contract's name held inline (a job is `Copy`): at most [`ContractName::LEN_MAX`] bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContractName {
    bytes: [u8; ContractName::LEN_MAX],
    len: u8,
}

impl ContractName {
    /// Longest name held (`perp_book::CONTRACT_LEN_MAX`).
    pub const LEN_MAX: usize = 32;

    /// `name`, when it fits.
    pub fn new(name: &str) -> Option<ContractName> {
        let mut bytes = [0u8; ContractName::LEN_MAX];
        bytes.get_mut(..name.len())?.copy_from_slice(name.as_bytes());
        Some(ContractName { bytes, len: name.len() as u8 })
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or("")
    }
}

/// What the REST thread answers.
#[derive(Debug)]
pub enum RestReply {
    /// A book's history: every timeframe's bars, oldest first.
    Backfill {
        /// The book.
        book: BookId,
        /// The bars.
        candles: Box<CandleSet>,
    },
    /// A book's history could not be fetched.
    BackfillFailed {
        /// The book.
        book: BookId,
        /// Why.
        error: RestError,
    },
    /// A depth snapshot body.
    Snapshot {
        /// The book.
        book: BookId,
        /// The body, as received.
        body: Bytes,
    },
    /// A depth snapshot could not be fetched.
    SnapshotFailed {
        /// The book.
        book: BookId,
        /// Why.
        error: RestError,
    },
    /// A Binance perpetual's open-interest body.
    PerpOi {
        /// The book.
        book: BookId,
        /// The body, as received.
        body: Bytes,
    },
    /// A Binance perpetual's open interest could not be fetched (asked again at its next turn).
    PerpOiFailed {
        /// The book.
        book: BookId,
        /// Why.
        error: RestError,
    },
    /// A venue's funding body (every perpetual).
    PerpFunding {
        /// The body, as received.
        body: Bytes,
    },
    /// A venue's funding could not be fetched (asked again at its next turn).
    PerpFundingFailed {
        /// Why.
        error: RestError,
    },
}

/// The shard side of the REST thread: where to queue jobs and find replies.
#[derive(Clone)]
pub struct RestHandle {
    jobs: Arc<ArrayQueue<(usize, RestJob)>>,
    replies: Arc<ArrayQueue<RestReply>>,
    wake: Arc<Notify>,
    shard: usize,
}

impl RestHandle {
    /// Queues a job; at the bound it is handed back (ask again later).
    pub fn ask(&self, job: RestJob) -> Result<(), RestJob> {
        let r = self.jobs.push((self.shard, job)).map_err(|(_, j)| j);
        if r.is_ok() {
            self.wake.notify_one();
        }
        r
    }

    /// The next reply, if any.
    pub fn reply(&self) -> Option<RestReply> {
        self.replies.pop()
    }
}

/// What the thread needs to know about the books.
pub struct RestBooks {
    /// Every book (the registry the shards share; grown by this thread when venues list new
    /// pairs).
    pub registry: Arc<ArcSwap<Registry>>,
    /// The venue's own name per book (grown with the registry, before it).
    pub natives: Arc<ArcSwap<Vec<String>>>,
    /// Bars wanted per timeframe.
    pub bars_max: usize,
}

impl RestBooks {
    /// No books (the listing at start).
    pub fn empty() -> RestBooks {
        RestBooks {
            registry: Arc::new(ArcSwap::from_pointee(Registry::default())),
            natives: Default::default(),
            bars_max: 0,
        }
    }
}

/// What a refresh tells the rest of the server.
struct Hooks {
    on_listing: OnListing,
    grow: Grow,
    /// The perpetuals' refresh (`None`: `[derivatives]` off).
    perps: Option<super::perp_refresh::PerpRefresh>,
}

/// Called with each change a listing refresh makes (confirmed delistings, pairs listed again,
/// books added).
pub type OnListing = Box<dyn Fn(ListingChange) + Send>;

/// Installs a grown registry (the current one with pairs listed since appended); answers the
/// new ids, or why it was refused (no room). `rampart_state::Shared::grow` in the server.
pub type Grow = Box<dyn Fn(Registry) -> Result<Vec<BookId>, rampart_state::GrowError> + Send>;

/// How often a venue without any served pair (not listed at start) is listed again.
pub const EMPTY_VENUE_REFRESH: Duration = Duration::from_secs(15);

/// The REST thread.
pub struct Rest {
    jobs: Arc<ArrayQueue<(usize, RestJob)>>,
    replies: Vec<Arc<ArrayQueue<RestReply>>>,
    wake: Arc<Notify>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// Counters, by `Venue::index`.
    pub stats: Arc<[RestStats; Venue::COUNT]>,
}

impl Rest {
    /// The queues for `shards` shards; [`Rest::start`] starts the thread.
    pub fn new(shards: usize) -> Rest {
        Rest {
            jobs: Arc::new(ArrayQueue::new(JOBS_MAX)),
            replies: (0..shards).map(|_| Arc::new(ArrayQueue::new(REPLIES_MAX))).collect(),
            wake: Arc::new(Notify::new()),
            stop: Arc::new(AtomicBool::new(false)),
            thread: None,
            stats: Arc::new(Default::default()),
        }
    }

    /// The handle for shard `shard`.
    pub fn handle(&self, shard: usize) -> RestHandle {
        RestHandle { jobs: self.jobs.clone(), replies: self.replies[shard].clone(), wake: self.wake.clone(), shard }
    }

    /// Starts the thread: it serves jobs and refreshes the listings of `venues`, calling
    /// `on_listing` for every change a refresh makes to the served books.
    pub fn start(
        &mut self,
        venues: Vec<VenueSettings>,
        books: RestBooks,
        tls: Option<Arc<rustls::ClientConfig>>,
        on_listing: OnListing,
        grow: Grow,
        perps: Option<super::perp_refresh::PerpRefresh>,
    ) -> std::io::Result<()> {
        let (jobs, replies, wake, stop, stats) =
            (self.jobs.clone(), self.replies.clone(), self.wake.clone(), self.stop.clone(), self.stats.clone());
        let thread = std::thread::Builder::new().name("venue-rest".into()).spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(r) => r,
                Err(e) => {
                    tracing::error!("venue REST: no runtime: {e}");
                    return;
                }
            };
            let local = tokio::task::LocalSet::new();
            let ctx = Rc::new(Ctx { venues, books, tls, stats, pacers: Default::default() });
            let hooks = Hooks { on_listing, grow, perps };
            local.block_on(&runtime, run(ctx, jobs, replies, wake, stop, hooks));
        })?;
        self.thread = Some(thread);
        Ok(())
    }

    /// Stops the thread; jobs in flight are abandoned.
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Release);
        self.wake.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Ctx {
    venues: Vec<VenueSettings>,
    books: RestBooks,
    tls: Option<Arc<rustls::ClientConfig>>,
    stats: Arc<[RestStats; Venue::COUNT]>,
    /// Per venue: its budget ([`Pacer`], sans-I/O: this thread reads the clock and sleeps).
    pacers: [std::cell::Cell<Pacer>; Venue::COUNT],
}

impl Ctx {
    fn settings(&self, venue: Venue) -> Option<&VenueSettings> {
        self.venues.iter().find(|v| v.venue == venue)
    }

    /// Waits for `weight` of the venue's budget.
    async fn pace(&self, venue: Venue, weight: f64) {
        let rate = self.settings(venue).map_or(1.0, |s| s.rest_weight_per_s);
        let now = Instant::now();
        let slot = self.with_pacer(venue, |p| p.reserve(now, weight, rate));
        if slot > now {
            tokio::time::sleep_until(slot.into()).await;
        }
    }

    /// Pauses `venue` for `d`, at most its `retry_after_max_s` (a 429 or 403, `probe`: probed).
    fn pause(&self, venue: Venue, d: Duration, probe: bool) {
        let most = self.settings(venue).map_or(RETRY_AFTER_MAX, |s| Duration::from_secs(s.retry_after_max_s));
        let now = Instant::now();
        self.with_pacer(venue, |p| p.pause(now, d, most, probe));
    }

    /// The venue answered: a probed pause is over.
    fn answered(&self, venue: Venue) {
        let now = Instant::now();
        self.with_pacer(venue, |p| p.answered(now));
    }

    fn with_pacer<T>(&self, venue: Venue, f: impl FnOnce(&mut Pacer) -> T) -> T {
        let cell = &self.pacers[venue.index()];
        let mut p = cell.get();
        let out = f(&mut p);
        cell.set(p);
        out
    }

    /// A paced GET; rate-limit answers pause the venue and count as errors.
    async fn get(&self, venue: Venue, url: &str, weight: f64) -> Result<Bytes, RestError> {
        self.pace(venue, weight).await;
        let stats = &self.stats[venue.index()];
        stats.requests.fetch_add(1, Ordering::Relaxed);
        let r = match tokio::time::timeout(REQUEST_TIMEOUT, get(url, self.tls.clone())).await {
            Ok(r) => r,
            Err(_) => Err(fail("timed out")),
        };
        if r.is_ok() {
            self.answered(venue);
        }
        r.map_err(|e| {
            stats.errors.fetch_add(1, Ordering::Relaxed);
            match e.error {
                RestError::Status { status: status @ (429 | 418 | 403), .. } => {
                    stats.rate_limited.fetch_add(1, Ordering::Relaxed);
                    self.pause(venue, e.retry_after.unwrap_or(RATE_LIMIT_PAUSE), status != 418);
                    e.error
                }
                RestError::Transport(t) => RestError::Transport(format!("GET {url}: {t}")),
                other => other,
            }
        })
    }
}

/// A listing refresh in flight: the venue's index and the result, with the perpetuals' listing
/// (`None`: not asked, `[derivatives]` off).
type ListingTask = tokio::task::JoinHandle<(usize, Result<Vec<Listed>, RestError>, Option<PerpListed>)>;
/// A venue's perpetual listing as a refresh read it.
type PerpListed = Result<super::perp_listing::PerpListing, RestError>;

// Long: the venue-rest thread's one loop: each round takes the shards' requests, the listing
// refreshes and the replies in turn, over state the loop owns.
async fn run(
    ctx: Rc<Ctx>,
    jobs: Arc<ArrayQueue<(usize, RestJob)>>,
    replies: Vec<Arc<ArrayQueue<RestReply>>>,
    wake: Arc<Notify>,
    stop: Arc<AtomicBool>,
    mut hooks: Hooks,
) {
    // One result per job in flight; bounded by the in-flight caps.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(usize, Venue, RestReply)>();
    let mut waiting: VecDeque<(usize, RestJob)> = VecDeque::new();
    let mut undelivered: Vec<VecDeque<RestReply>> = (0..replies.len()).map(|_| VecDeque::new()).collect();
    let mut in_flight = [0usize; Venue::COUNT];
    let mut next_refresh: Vec<Instant> =
        ctx.venues.iter().map(|v| Instant::now() + Duration::from_secs(v.refresh_s.max(10))).collect();
    let mut listing: Option<ListingTask> = None;
    let mut watch = ListingWatch::new(ctx.books.registry.load().len());
    while !stop.load(Ordering::Acquire) {
        while let Some(j) = jobs.pop() {
            waiting.push_back(j);
        }
        let mut k = 0;
        while k < waiting.len() {
            let (shard, job) = waiting[k];
            let venue = match job {
                RestJob::Backfill { book } | RestJob::Snapshot { book } | RestJob::PerpOi { book, .. } => {
                    ctx.books.registry.load().get(book).venue
                }
                RestJob::PerpFunding { venue } => venue,
            };
            if in_flight[venue.index()] >= IN_FLIGHT_PER_VENUE_MAX {
                k += 1;
                continue;
            }
            waiting.remove(k);
            in_flight[venue.index()] += 1;
            let ctx = ctx.clone();
            let mut answer = Answer { tx: Some(tx.clone()), shard, venue, job, stats: ctx.stats.clone() };
            tokio::task::spawn_local(async move {
                let reply = match job {
                    RestJob::Backfill { book } => {
                        match tokio::time::timeout(BACKFILL_BOOK_TIMEOUT, backfill(&ctx, book)).await {
                            Ok(r) => r,
                            Err(_) => {
                                ctx.stats[venue.index()].backfill_failed.fetch_add(1, Ordering::Relaxed);
                                let error =
                                    RestError::TimedOut { what: "history", secs: BACKFILL_BOOK_TIMEOUT.as_secs() };
                                RestReply::BackfillFailed { book, error }
                            }
                        }
                    }
                    RestJob::Snapshot { book } => snapshot(&ctx, book).await,
                    RestJob::PerpOi { book, contract } => perp_oi(&ctx, book, contract).await,
                    RestJob::PerpFunding { venue } => perp_funding(&ctx, venue).await,
                };
                answer.send(reply);
            });
        }
        // Listing refresh, one venue at a time.
        if let Some(h) = listing.as_ref().filter(|h| h.is_finished()) {
            let _ = h;
            if let Some(h) = listing.take() {
                if let Ok((i, result, perps)) = h.await {
                    refreshed(&ctx, &ctx.venues[i], result, &mut watch, &hooks);
                    if let (Some(p), Some(listing)) = (hooks.perps.as_mut(), perps) {
                        p.refreshed(ctx.venues[i].venue, &ctx.books.registry.load(), listing);
                    }
                }
            }
        }
        if listing.is_none() {
            if let Some(i) = next_refresh.iter().position(|t| *t <= Instant::now()) {
                let s = &ctx.venues[i];
                let served = ctx.books.registry.load().venue_books(s.venue).len();
                let period = Duration::from_secs(s.refresh_s.max(10));
                next_refresh[i] = Instant::now() + if served == 0 { period.min(EMPTY_VENUE_REFRESH) } else { period };
                let (ctx2, perps) = (ctx.clone(), hooks.perps.is_some());
                listing = Some(tokio::task::spawn_local(async move {
                    let s = &ctx2.venues[i];
                    let spot = list_with(&ctx2, s).await;
                    let perp = match perps {
                        true => Some(perp_listing_of(&ctx2, s).await),
                        false => None,
                    };
                    (i, spot, perp)
                }));
            }
        }
        for (shard, queue) in undelivered.iter_mut().enumerate() {
            while let Some(r) = queue.pop_front() {
                if let Err(r) = replies[shard].push(r) {
                    queue.push_front(r);
                    break;
                }
            }
        }
        tokio::select! {
            Some((shard, venue, reply)) = rx.recv() => {
                in_flight[venue.index()] -= 1;
                undelivered[shard].push_back(reply);
            }
            _ = wake.notified() => {}
            _ = tokio::time::sleep(Duration::from_millis(50)) => {}
        }
    }
}

/// Compares a fresh listing with the served books and acts on what [`ListingWatch`] accepts;
/// then serves the pairs listed for the first time ([`add_new_listings`]).
fn refreshed(
    ctx: &Ctx,
    s: &VenueSettings,
    result: Result<Vec<Listed>, RestError>,
    watch: &mut ListingWatch,
    hooks: &Hooks,
) {
    let stats = &ctx.stats[s.venue.index()];
    let list = match result {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!("{}: listing refresh failed: {e}", s.venue.as_str());
            return;
        }
    };
    let registry = ctx.books.registry.load_full();
    let mut now_listed = std::collections::HashMap::with_capacity(list.len());
    for l in &list {
        now_listed.insert(l.instrument.symbol.as_str(), l.instrument.status);
    }
    let mut changes = Vec::new();
    if let Err(fault) = watch.review(&registry, s.venue, &now_listed, &mut changes) {
        stats.listing_faults.fetch_add(1, Ordering::Relaxed);
        tracing::warn!("{}: listing refresh refused: {fault}", s.venue.as_str());
        return;
    }
    stats.listings.fetch_add(1, Ordering::Relaxed);
    stats.delistings_suspected.store(watch.suspected(&registry, s.venue) as u64, Ordering::Relaxed);
    for change in changes {
        let (what, book, counter) = match change {
            ListingChange::Delisted(b) => ("delisted", b, &stats.delistings),
            ListingChange::Relisted(b) => ("listed again", b, &stats.relistings),
            ListingChange::Added(b) => ("added", b, &stats.added),
        };
        counter.fetch_add(1, Ordering::Relaxed);
        tracing::info!("{}: {} {what}", s.venue.as_str(), registry.get(book).symbol);
        (hooks.on_listing)(change);
    }
    drop(now_listed);
    add_new_listings(ctx, s, list, watch, hooks);
}

/// Serves the trading pairs of a fresh listing that the registry does not have yet: the
/// registry and the native names grow (ids kept), and each new book is handed to its shard.
/// Beyond the shards' room they are counted (`newListings`) and not served.
fn add_new_listings(ctx: &Ctx, s: &VenueSettings, list: Vec<Listed>, watch: &mut ListingWatch, hooks: &Hooks) {
    let stats = &ctx.stats[s.venue.index()];
    let registry = ctx.books.registry.load_full();
    let new: Vec<Listed> = list
        .into_iter()
        .filter(|l| l.instrument.status == Status::Trading && registry.find(s.venue, &l.instrument.symbol).is_none())
        .collect();
    if new.is_empty() {
        stats.new_listings.store(0, Ordering::Relaxed);
        return;
    }
    let count = new.len();
    let mut natives: Vec<String> = ctx.books.natives.load().as_ref().clone();
    natives.resize(registry.len(), String::new());
    let mut instruments = Vec::with_capacity(count);
    for l in new {
        natives.push(l.native);
        instruments.push(l.instrument);
    }
    let grown = match registry.with_added(instruments) {
        Ok(r) => r,
        Err(e) => {
            stats.new_listings.store(count as u64, Ordering::Relaxed);
            tracing::warn!("{}: {count} new pairs not served: {e:?}", s.venue.as_str());
            return;
        }
    };
    // The names first: a job for a new book must find its name.
    ctx.books.natives.store(Arc::new(natives));
    match (hooks.grow)(grown) {
        Ok(ids) => {
            watch.grow(ctx.books.registry.load().len());
            stats.new_listings.store(0, Ordering::Relaxed);
            tracing::info!("{}: {} pairs listed since start, now served", s.venue.as_str(), ids.len());
            for id in ids {
                stats.added.fetch_add(1, Ordering::Relaxed);
                (hooks.on_listing)(ListingChange::Added(id));
            }
        }
        Err(e) => {
            stats.new_listings.store(count as u64, Ordering::Relaxed);
            tracing::warn!("{}: {count} new pairs not served: {e}", s.venue.as_str());
        }
    }
}

/// A job's answer, sent exactly once: by [`Answer::send`], or on drop (the task panicked or was
/// dropped) as a failure, so the venue's slot is released and the shard asks again.
struct Answer {
    /// `None` once the answer is sent.
    tx: Option<tokio::sync::mpsc::UnboundedSender<(usize, Venue, RestReply)>>,
    shard: usize,
    venue: Venue,
    job: RestJob,
    stats: Arc<[RestStats; Venue::COUNT]>,
}

impl Answer {
    fn send(&mut self, reply: RestReply) {
        if let Some(tx) = self.tx.take() {
            let _ = tx.send((self.shard, self.venue, reply));
        }
    }
}

impl Drop for Answer {
    fn drop(&mut self) {
        let Some(tx) = self.tx.take() else { return };
        self.stats[self.venue.index()].tasks_lost.fetch_add(1, Ordering::Relaxed);
        let reply = match self.job {
            RestJob::Backfill { book } => RestReply::BackfillFailed { book, error: RestError::Unanswered },
            RestJob::Snapshot { book } => RestReply::SnapshotFailed { book, error: RestError::Unanswered },
            RestJob::PerpOi { book, .. } => RestReply::PerpOiFailed { book, error: RestError::Unanswered },
            RestJob::PerpFunding { .. } => RestReply::PerpFundingFailed { error: RestError::Unanswered },
        };
        let _ = tx.send((self.shard, self.venue, reply));
    }
}

async fn list_with(ctx: &Ctx, s: &VenueSettings) -> Result<Vec<Listed>, RestError> {
    let (url, weight) = with_protocol!(s.venue, P => (P::listing_url(&s.rest), P::LISTING_WEIGHT));
    let body = ctx.get(s.venue, &url, weight).await?;
    let mut list = with_protocol!(s.venue, P => P::parse_listing(&body))?;
    let dropped = drop_collisions(&mut list);
    if dropped > 0 {
        tracing::warn!("{}: {dropped} instruments dropped: BASEQUOTE collides with another", s.venue.as_str());
    }
    Ok(list)
}

/// How [`ask_each_venue`] asks at start-up.
struct Asking {
    /// Until when a venue is asked again.
    timeout: Duration,
    /// The pause after a failure: 500 ms doubled at most this many times.
    doublings: u32,
    /// Whether a venue that answered with an error status or an unreadable body is asked again
    /// (only an unanswered request is, otherwise).
    again_after_refusal: bool,
    /// What is asked, for the message of a task that failed.
    what: &'static str,
}

/// Asks every venue at once with `ask`, on the calling thread (start-up): one result per venue,
/// in order. A venue that fails is asked again after a pause, as `how` says, until its timeout,
/// then left with its last error.
fn ask_each_venue<T: 'static, Fut>(
    venues: &[VenueSettings],
    tls: Option<Arc<rustls::ClientConfig>>,
    how: Asking,
    ask: impl Fn(Rc<Ctx>, usize) -> Fut + Copy + 'static,
) -> Vec<Result<T, RestError>>
where
    Fut: std::future::Future<Output = Result<T, RestError>> + 'static,
{
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => return venues.iter().map(|_| Err(RestError::Transport(format!("no runtime: {e}")))).collect(),
    };
    let ctx = Rc::new(Ctx {
        venues: venues.to_vec(),
        books: RestBooks::empty(),
        tls,
        stats: Arc::new(Default::default()),
        pacers: Default::default(),
    });
    tokio::task::LocalSet::new().block_on(&runtime, async {
        let deadline = tokio::time::Instant::now() + how.timeout;
        let tasks: Vec<_> = (0..venues.len())
            .map(|i| {
                let ctx = ctx.clone();
                tokio::task::spawn_local(async move {
                    let mut last = RestError::Transport(format!("no answer within {} s", how.timeout.as_secs()));
                    for attempt in 0..u32::MAX {
                        match tokio::time::timeout_at(deadline, ask(ctx.clone(), i)).await {
                            Ok(Ok(answer)) => return Ok(answer),
                            Ok(Err(e)) if !how.again_after_refusal && !matches!(e, RestError::Transport(_)) => {
                                return Err(e)
                            }
                            Ok(Err(e)) => last = e,
                            Err(_) => break,
                        }
                        let pause = Duration::from_millis(500u64 << attempt.min(how.doublings));
                        if tokio::time::timeout_at(deadline, tokio::time::sleep(pause)).await.is_err() {
                            break;
                        }
                    }
                    Err(last)
                })
            })
            .collect();
        let mut out = Vec::with_capacity(venues.len());
        for t in tasks {
            out.push(t.await.unwrap_or_else(|e| Err(RestError::Transport(format!("{} task failed: {e}", how.what)))));
        }
        out
    })
}

/// Lists every venue once, on the calling thread (start-up): one result per venue, in order.
/// The venues are asked at once; a venue that fails is asked again after a short pause until
/// [`LISTING_START_TIMEOUT`], then left out with its last error.
pub fn list_venues(
    venues: &[VenueSettings],
    tls: Option<Arc<rustls::ClientConfig>>,
) -> Vec<Result<Vec<Listed>, RestError>> {
    let how = Asking { timeout: LISTING_START_TIMEOUT, doublings: 4, again_after_refusal: true, what: "listing" };
    ask_each_venue(venues, tls, how, |ctx, i| async move { list_with(&ctx, &ctx.venues[i]).await })
}

/// Lists every venue's USDT perpetuals once, on the calling thread (start-up, decisions §17):
/// one result per venue, in order, Binance's with its `fundingInfo` intervals. The venues are
/// asked at once; one that fails to answer is asked again after a short pause until
/// [`PERP_LISTING_START_TIMEOUT`], one that answers with an error status or a body that is not
/// a listing (a host that serves no perpetuals) is not asked again. Either way it runs without
/// perpetuals (its spot feed runs on).
pub fn list_perps(
    venues: &[VenueSettings],
    tls: Option<Arc<rustls::ClientConfig>>,
) -> Vec<Result<super::perp_listing::PerpListing, RestError>> {
    let how = Asking {
        timeout: PERP_LISTING_START_TIMEOUT,
        doublings: 3,
        again_after_refusal: false,
        what: "perpetual listing",
    };
    ask_each_venue(venues, tls, how, |ctx, i| async move { perp_listing_of(&ctx, &ctx.venues[i]).await })
}

async fn perp_listing_of(ctx: &Ctx, s: &VenueSettings) -> Result<super::perp_listing::PerpListing, RestError> {
    use super::perp_listing;
    let weight = with_protocol!(s.venue, P => P::LISTING_WEIGHT);
    let body = ctx.get(s.venue, &perp_listing::listing_url(s.venue, &s.perp_rest), weight).await?;
    let mut listing = perp_listing::parse(s.venue, &body)?;
    if s.venue == Venue::Binance {
        let body = ctx.get(s.venue, &perp_listing::binance_funding_info_url(&s.perp_rest), 1.0).await?;
        perp_listing::apply_binance_funding_info(&mut listing, &body)?;
    }
    Ok(listing)
}

/// `GET /api/v5/public/funding-rate?instId=ANY` (OKX: every swap, one request of its 10 per 2 s),
/// on the venue's budget; skipped as [`perp_oi`] is while the venue is paused or its budget spent.
async fn perp_funding(ctx: &Ctx, venue: Venue) -> RestReply {
    let Some(s) = ctx.settings(venue).filter(|_| venue == Venue::Okx) else {
        return RestReply::PerpFundingFailed { error: RestError::NotConfigured };
    };
    if ctx.with_pacer(venue, |p| p.is_busy(Instant::now(), OI_POLL_SLACK)) {
        return RestReply::PerpFundingFailed { error: RestError::Transport("the venue's REST budget is busy".into()) };
    }
    let url = format!("{}/api/v5/public/funding-rate?instId=ANY", s.perp_rest);
    match ctx.get(venue, &url, 1.0).await {
        Ok(body) => RestReply::PerpFunding { body },
        Err(error) => RestReply::PerpFundingFailed { error },
    }
}

/// `GET /fapi/v1/openInterest` of one Binance perpetual (weight 1), on the venue's budget; skipped
/// while a `Retry-After` pause holds the venue or its budget is spent beyond [`OI_POLL_SLACK`].
async fn perp_oi(ctx: &Ctx, book: BookId, contract: ContractName) -> RestReply {
    let Some(s) = ctx.settings(Venue::Binance) else {
        return RestReply::PerpOiFailed { book, error: RestError::NotConfigured };
    };
    // Optional: never queued behind a rate-limit pause or a spent budget (the spot feed's
    // snapshots and history come first); the contract is asked again at its next turn.
    if ctx.with_pacer(Venue::Binance, |p| p.is_busy(Instant::now(), OI_POLL_SLACK)) {
        return RestReply::PerpOiFailed { book, error: RestError::Transport("the venue's REST budget is busy".into()) };
    }
    let url = format!("{}/fapi/v1/openInterest?symbol={}", s.perp_rest, contract.as_str());
    match ctx.get(Venue::Binance, &url, 1.0).await {
        Ok(body) => RestReply::PerpOi { book, body },
        Err(error) => RestReply::PerpOiFailed { book, error },
    }
}

async fn snapshot(ctx: &Ctx, book: BookId) -> RestReply {
    let registry = ctx.books.registry.load_full();
    let ins = registry.get(book);
    let Some(s) = ctx.settings(ins.venue) else {
        return RestReply::SnapshotFailed { book, error: RestError::NotConfigured };
    };
    let natives = ctx.books.natives.load_full();
    let native = natives.get(book.index()).map_or("", String::as_str);
    match ctx.get(ins.venue, &binance::snapshot_url(&s.rest, native), binance::SNAPSHOT_WEIGHT).await {
        Ok(body) => RestReply::Snapshot { book, body },
        Err(error) => RestReply::SnapshotFailed { book, error },
    }
}

async fn backfill(ctx: &Ctx, book: BookId) -> RestReply {
    let venue = ctx.books.registry.load().get(book).venue;
    let Some(s) = ctx.settings(venue) else {
        return RestReply::BackfillFailed { book, error: RestError::NotConfigured };
    };
    let natives = ctx.books.natives.load_full();
    let native = natives.get(book.index()).map_or("", String::as_str);
    let want = ctx.books.bars_max;
    let mut set = Box::new(CandleSet::new(want));
    for tf in Timeframe::ALL {
        let bars = with_protocol!(venue, P => history::<P>(ctx, s, native, tf, want).await);
        match bars {
            Ok(bars) => {
                for bar in bars {
                    set.load(tf, bar);
                }
            }
            Err(error) => {
                ctx.stats[venue.index()].backfill_failed.fetch_add(1, Ordering::Relaxed);
                return RestReply::BackfillFailed { book, error };
            }
        }
    }
    ctx.stats[venue.index()].backfilled.fetch_add(1, Ordering::Relaxed);
    RestReply::Backfill { book, candles: set }
}

/// The latest `want` bars of one timeframe, oldest first, paging backwards.
async fn history<A: RestApi>(
    ctx: &Ctx,
    s: &VenueSettings,
    native: &str,
    tf: Timeframe,
    want: usize,
) -> Result<CandlePage, RestError> {
    let mut bars: CandlePage = Vec::with_capacity(want + A::LATEST_PAGE_MAX);
    let mut end: Option<i64> = None;
    for page in 0..BACKFILL_PAGES_MAX {
        let limit = if page == 0 { want.min(A::LATEST_PAGE_MAX) } else { (want - bars.len()).min(A::OLDER_PAGE_MAX) };
        let url = A::candles_url(&s.rest, native, tf, end, limit.max(1));
        let mut attempt = 0;
        let got = loop {
            let r = match ctx.get(s.venue, &url, A::CANDLES_WEIGHT).await {
                Ok(body) => A::parse_candles(&body),
                Err(e) => Err(e),
            };
            match r {
                Ok(p) => break p,
                Err(e) if attempt + 1 >= BACKFILL_ATTEMPTS_MAX => return Err(e),
                Err(_) => {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(500 << attempt)).await;
                }
            }
        };
        let oldest_before = bars.first().map(|c| c.open_ms);
        let older: Vec<_> = got.into_iter().filter(|c| oldest_before.is_none_or(|o| c.open_ms < o)).collect();
        if older.is_empty() {
            break;
        }
        end = older.first().map(|c| c.open_ms);
        bars.splice(0..0, older);
        if bars.len() >= want {
            break;
        }
    }
    if bars.len() > want {
        bars.drain(..bars.len() - want);
    }
    Ok(bars)
}

struct GetError {
    error: RestError,
    retry_after: Option<Duration>,
}

fn fail(text: impl Into<String>) -> GetError {
    GetError { error: RestError::Transport(text.into()), retry_after: None }
}

/// One GET over a fresh connection (`rampart_outbound::http`, the process's one client):
/// status 200 with a body within [`REST_ANSWER_BYTES_MAX`].
async fn get(url: &str, tls: Option<Arc<rustls::ClientConfig>>) -> Result<Bytes, GetError> {
    let parsed = ssrf::parse(url).map_err(|e| fail(format!("bad URL: {e}")))?;
    let addrs = http::resolve(&parsed).await.map_err(|e| fail(e.0))?;
    let (_, mut conn) = http::open(&addrs, &parsed, tls).await.map_err(|e| fail(e.0))?;
    let req = http::request(Method::GET, &parsed, Bytes::new()).map_err(|e| fail(e.to_string()))?;
    let resp = conn.sender.send_request(req).await.map_err(|e| fail(format!("HTTP: {e}")))?;
    let status = resp.status().as_u16();
    let retry_after = resp
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|s| Duration::from_secs(s.min(RETRY_AFTER_MAX.as_secs())));
    let body = Limited::new(resp.into_body(), REST_ANSWER_BYTES_MAX)
        .collect()
        .await
        .map_err(|e| fail(format!("body: {e}")))?
        .to_bytes();
    if status != 200 {
        let snippet = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
        return Err(GetError { error: RestError::Status { status, snippet }, retry_after });
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(retry_after_max_s: u64) -> Ctx {
        let mut s = VenueSettings::default_for(Venue::Binance);
        s.retry_after_max_s = retry_after_max_s;
        let books = RestBooks::empty();
        Ctx { venues: vec![s], books, tls: None, stats: Arc::new(Default::default()), pacers: Default::default() }
    }

    /// The venue's own `retry_after_max_s` bounds its pauses (the rule itself is
    /// `pacer::Pacer`'s, tested there in synthetic time); a venue not configured has the hard bound.
    #[test]
    fn a_venue_pause_is_bounded_by_its_settings() {
        let c = ctx(7);
        let before = Instant::now();
        c.pause(Venue::Binance, Duration::MAX, false);
        let until = c.pacers[Venue::Binance.index()].get().next().expect("paused");
        assert!(until >= before + Duration::from_secs(7) && until <= Instant::now() + Duration::from_secs(7));
        c.pause(Venue::Okx, Duration::MAX, false);
        let until = c.pacers[Venue::Okx.index()].get().next().expect("paused");
        assert!(until <= Instant::now() + RETRY_AFTER_MAX);
    }

    /// A job task that panics still answers: a failure for the shard, its slot released.
    #[test]
    fn a_lost_task_answers_a_failure() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let stats: Arc<[RestStats; Venue::COUNT]> = Arc::new(Default::default());
        let job = RestJob::Snapshot { book: BookId(3) };
        let answer = Answer { tx: Some(tx.clone()), shard: 1, venue: Venue::Binance, job, stats: stats.clone() };
        let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
        let local = tokio::task::LocalSet::new();
        local.block_on(&runtime, async move {
            let h = tokio::task::spawn_local(async move {
                let _answer = answer;
                panic!("injected");
            });
            assert!(h.await.is_err(), "the task panicked");
        });
        match rx.try_recv() {
            Ok((1, Venue::Binance, RestReply::SnapshotFailed { book: BookId(3), .. })) => {}
            other => panic!("expected a failure answer, got {other:?}"),
        }
        assert_eq!(stats[Venue::Binance.index()].tasks_lost.load(Ordering::Relaxed), 1);
        // An answered job sends exactly one reply.
        let mut answered = Answer { tx: Some(tx), shard: 0, venue: Venue::Okx, job, stats: stats.clone() };
        answered.send(RestReply::SnapshotFailed { book: BookId(3), error: RestError::Unanswered });
        drop(answered);
        assert!(rx.try_recv().is_ok());
        assert!(rx.try_recv().is_err());
        assert_eq!(stats[Venue::Okx.index()].tasks_lost.load(Ordering::Relaxed), 0);
    }
}
