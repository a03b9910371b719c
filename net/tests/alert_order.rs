//! One order for each alert's state (issue #58, `docs/decisions.md` §16 "One order"): a seeded
//! simulation of several front threads, the writer and two shards, in random interleavings,
//! after which the state storage holds of every alert and the state its shards hold are
//! compared.
//!
//! What is real: the store (SQLite here, PostgreSQL in the second test) and its version of
//! every write; the front's requests as `AlertsApi` makes them (`parse_patch`, `check_change`,
//! `update_alert`, `delete_alert`, `insert_alert`) and the change each hands over
//! (`AlertRow::change_after`) through the real routing (`Commands::alert`, one bounded queue per
//! shard); the writer thread (`rampart_store::writer::Writer`: firings recorded in batches, `*`
//! firings collected into bodies, `max_fires`, the flood guard, expiries, and its `on_ended`
//! changes); the shards' side (`ShardAlerts::apply` over engine `Market`s, firings decided by
//! `Market::apply` on trades, sent on real event queues). What is simulated: time (a manual
//! clock), the market's trades, and the order in which stored changes reach the shards — each
//! front thread holds up to [`IN_FLIGHT_MAX`] requests whose storage step is done and whose
//! hand-over is not, and hands any of them over next, as threads racing to the shard's queue do.
//!
//! Per seed it prints the operations made and the divergences found; it must find none.
//! `RAMPART_ORDER_OPS` sets the operations per seed (CI: a few thousand; a long run: a million),
//! `RAMPART_ORDER_SEEDS` the seeds, `RAMPART_FUZZ_SEED` one seed to replay, and
//! `RAMPART_ORDER_UNVERSIONED=1` stamps each change with its arrival order instead of storage's
//! (the shard applying changes as they come, as before #58): the divergences that finds are the
//! ones versions prevent.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use crossbeam_queue::ArrayQueue;
use rampart_engine::alert::{AlertSpec, Condition, Cross, Move};
use rampart_engine::market::Outcome;
use rampart_engine::{BookId, Instrument, Market, Price, Qty, Registry, Status, Tick, TickKind, Timeframe, Venue};
use rampart_net::alerts::{lifecycle, patch, rules};
use rampart_shard::ShardAlerts;
use rampart_state::clock::{ManualClock, SharedClock};
use rampart_state::partition::UNIVERSE;
use rampart_state::{AlertChange, Command, Commands, EventQueue, EventSender, ShardEvent, Shared};
use rampart_store::storage::StorageHealth;
use rampart_store::store::{AlertRow, NewAlert, StatusFilter, Store, WebhookFormat};
use rampart_store::text::Texts;
use rampart_store::writer::{Writer, WriterHooks};
use rampart_testkit::rng::Rng;
use serde_json::{json, Value};

/// Front threads.
const FRONTS: usize = 4;
/// Requests a front thread holds between their storage step and their hand-over, at most.
const IN_FLIGHT_MAX: usize = 12;
const SHARDS: usize = 2;
const T0: i64 = 1_800_000_000_000;
const PAIRS: [(Venue, &str, &str, &str, i64); 5] = [
    (Venue::Binance, "BTCUSDT", "BTC", "USDT", 6_500_000_000_000),
    (Venue::Binance, "ETHUSDT", "ETH", "USDT", 300_000_000_000),
    (Venue::Binance, "SOLUSDT", "SOL", "USDT", 15_000_000_000),
    (Venue::Okx, "BTCUSDT", "BTC", "USDT", 6_500_000_000_000),
    (Venue::Okx, "XRPUSDT", "XRP", "USDT", 60_000_000),
];

struct ShardSide {
    market: Market,
    alerts: ShardAlerts,
    queue: Arc<ArrayQueue<Command>>,
    events: EventSender,
}

/// What one seed's run did and found.
#[derive(Debug, Default)]
struct Outcomes {
    ops: u64,
    creates: u64,
    patches: u64,
    deletes: u64,
    handed: u64,
    trades: u64,
    divergences: Vec<String>,
}

struct World {
    rng: Rng,
    store: Store,
    clock: Arc<ManualClock>,
    shared: Arc<Shared>,
    commands: Commands,
    shards: Vec<ShardSide>,
    /// Per front thread: changes stored, not yet handed to the shards.
    fronts: Vec<Vec<(AlertRow, AlertChange)>>,
    /// The writer's `on_ended` changes, not yet handed over.
    ended: Arc<Mutex<Vec<AlertRow>>>,
    writer: Option<Writer>,
    /// What the writer reports of its commits.
    health: Arc<StorageHealth>,
    prices: Vec<i64>,
    /// `PAIRS`' books, in its order.
    books: Vec<BookId>,
    accounts: Vec<i64>,
    created: Vec<(i64, i64)>,
    /// Unversioned mode: the next arrival's stamp.
    arrivals: u64,
    unversioned: bool,
    out: Outcomes,
}

fn registry() -> Registry {
    let instruments = PAIRS
        .iter()
        .map(|&(venue, symbol, base, quote, _)| Instrument {
            venue,
            symbol: symbol.into(),
            base: base.into(),
            quote: quote.into(),
            tick: Price(1_000_000),
            lot: Qty(1),
            status: Status::Trading,
        })
        .collect();
    Registry::new(instruments).expect("registry")
}

impl World {
    fn new(seed: u64, store: Store, writer_store: Store, unversioned: bool) -> World {
        let registry = Arc::new(registry());
        let books = Arc::new(ArcSwap::new(registry.clone()));
        let shared = Arc::new(Shared::new(books.clone(), registry.len(), SHARDS, false));
        let clock = Arc::new(ManualClock::new(T0));
        let mut shards = Vec::new();
        let mut queues = Vec::new();
        let mut event_queues = Vec::new();
        for index in 0..SHARDS {
            let owned: Vec<BookId> = registry
                .ids()
                .filter(|b| shared.slots[b.index()].shard.load(Ordering::Relaxed) as usize == index)
                .collect();
            let queue = Arc::new(ArrayQueue::new(rampart_state::COMMANDS_MAX));
            let events = Arc::new(EventQueue::new(65_536));
            queues.push(queue.clone());
            event_queues.push(events.clone());
            let market = Market::new(shared.capacity, &owned, 16, 64);
            shards.push(ShardSide {
                market,
                alerts: ShardAlerts::default(),
                queue,
                events: EventSender::new(events, 64),
            });
        }
        let commands = Commands::new(queues, shared.clone());
        let ended = Arc::new(Mutex::new(Vec::new()));
        let told = ended.clone();
        let hooks = WriterHooks {
            owns: Box::new(|_| true),
            on_ended: Box::new(move |rows| told.lock().expect("ended").extend(rows.iter().cloned())),
            ..WriterHooks::new(Box::new(Texts), Box::new(|_, _| {}))
        };
        let shared_clock: SharedClock = clock.clone();
        let health = Arc::new(StorageHealth::default());
        let writer =
            Writer::start(writer_store, event_queues, books, health.clone(), shared_clock, hooks).expect("writer");
        let mut world = World {
            rng: Rng::new(seed),
            store,
            clock,
            shared,
            commands,
            shards,
            fronts: vec![Vec::new(); FRONTS],
            ended,
            writer: Some(writer),
            health,
            prices: PAIRS.iter().map(|p| p.4).collect(),
            books: PAIRS.iter().map(|p| registry.find(p.0, p.1).expect("listed")).collect(),
            accounts: Vec::new(),
            created: Vec::new(),
            arrivals: 0,
            unversioned,
            out: Outcomes::default(),
        };
        for _ in 0..3 {
            let key = world.store.create_account_with_key("developer", None, T0).expect("account");
            world.accounts.push(key.account_id);
        }
        world
    }

    fn now(&self) -> i64 {
        rampart_state::clock::Clock::now_ms(&*self.clock)
    }

    fn step(&mut self) {
        self.out.ops += 1;
        let f = self.rng.below(FRONTS);
        match self.rng.below(100) {
            0..=9 if self.fronts[f].len() < IN_FLIGHT_MAX => self.create(f),
            10..=34 if self.fronts[f].len() < IN_FLIGHT_MAX => self.patch(f),
            35..=37 if self.fronts[f].len() < IN_FLIGHT_MAX => self.delete(f),
            0..=59 => self.hand_over_one(f),
            60..=64 => self.hand_over_ended(),
            65..=76 => {
                let s = self.rng.below(SHARDS);
                let n = 1 + self.rng.below(8);
                self.take_commands(s, n);
            }
            77..=98 => self.trade(),
            _ => self.clock.advance(self.rng.below(3_000) as i64),
        }
        self.clock.advance(self.rng.below(40) as i64);
    }

    /// A create as `POST /v1/alerts` stores it: a price alert on its far side, a percent alert,
    /// or (one in ten) a repeating `*` percent alert.
    fn create(&mut self, f: usize) {
        let now = self.now();
        let account = self.accounts[self.rng.below(self.accounts.len())];
        let b = self.rng.below(PAIRS.len());
        let (venue, symbol, ..) = PAIRS[b];
        let universe = self.rng.chance(10);
        let pct = universe || self.rng.chance(40);
        let condition = if pct {
            let dir = [Move::Up, Move::Down, Move::Any][self.rng.below(3)];
            let millionths = 100_000 + 100_000 * self.rng.below(8) as u32;
            Condition::Pct { dir, millionths, window: [Timeframe::M5, Timeframe::H1][self.rng.below(2)] }
        } else {
            let p = self.prices[b];
            let off = p / 1_000 * (1 + self.rng.below(6) as i64);
            match self.rng.chance(50) {
                true => Condition::Price { cross: Cross::Above, level: Price(p + off) },
                false => Condition::Price { cross: Cross::Below, level: Price(p - off) },
            }
        };
        let repeat = universe || self.rng.chance(70);
        let new = NewAlert {
            account_id: account,
            exchange: venue,
            symbol: if universe { UNIVERSE.into() } else { symbol.into() },
            condition,
            repeat,
            note: String::new(),
            webhook_url: None,
            created_price: if universe { 0 } else { self.prices[b] },
            created_ms: now,
            expires_ms: self.rng.chance(20).then(|| now + 60_000 + self.rng.below(600_000) as i64),
            cooldown_s: [0, 0, 5, 60, 3_600][self.rng.below(5)],
            max_fires: (repeat && self.rng.chance(20)).then(|| 2 + self.rng.below(5) as u32),
            message: None,
            webhook_format: WebhookFormat::Json,
        };
        let row = self.store.insert_alert(&new).expect("insert");
        self.out.creates += 1;
        self.created.push((row.id, account));
        let change = row.change(false);
        self.fronts[f].push((row, change));
    }

    /// A `PATCH` of a random alert with random fields (every field of §16), as `AlertsApi`
    /// makes it: parsed, checked against the alert as it is, applied in one storage step.
    fn patch(&mut self, f: usize) {
        let Some(&(id, account)) = self.pick_alert() else { return };
        let now = self.now();
        let mut body = serde_json::Map::new();
        let fields = 1 + self.rng.below(3);
        for _ in 0..fields {
            let (k, v) = match self.rng.below(9) {
                0 | 1 => ("paused", json!(self.rng.chance(50))),
                2 => ("cooldown_s", json!([0, 5, 60, 3_600][self.rng.below(4)])),
                3 => ("note", json!(format!("n{}", self.rng.below(100)))),
                4 => ("webhook_url", if self.rng.chance(50) { json!("https://example.com/h") } else { Value::Null }),
                5 => (
                    "expires_at",
                    if self.rng.chance(70) {
                        json!(rampart_state::clock::iso8601(now + 60_000 + self.rng.below(600_000) as i64))
                    } else {
                        Value::Null
                    },
                ),
                6 => ("max_fires", if self.rng.chance(60) { json!(2 + self.rng.below(20)) } else { Value::Null }),
                7 => ("message", if self.rng.chance(60) { json!("{{symbol}} {{price}}") } else { Value::Null }),
                _ => ("webhook_format", json!(["json", "discord", "slack"][self.rng.below(3)])),
            };
            body.insert(k.into(), v);
        }
        let Ok(changes) = patch::parse_patch(Value::Object(body).to_string().as_bytes()) else { return };
        if let Some(Some(at)) = changes.expires_ms {
            if rules::check_expiry(Some(at), now).is_err() {
                return;
            }
        }
        let Some(before) = self.store.alert(id).expect("read").filter(|r| r.account_id == account) else { return };
        if lifecycle::check_change(&before, &changes).is_err() {
            return;
        }
        let Some(after) = self.store.update_alert(account, id, &changes).expect("update") else { return };
        self.out.patches += 1;
        let change = after.change_after(&before);
        self.fronts[f].push((after, change));
    }

    fn delete(&mut self, f: usize) {
        let Some(&(id, account)) = self.pick_alert() else { return };
        if let Some(row) = self.store.delete_alert(account, id, self.now()).expect("delete") {
            self.out.deletes += 1;
            let change = row.change(false);
            self.fronts[f].push((row, change));
        }
    }

    fn pick_alert(&mut self) -> Option<&(i64, i64)> {
        if self.created.is_empty() {
            return None;
        }
        // Mostly the newest ones, so most alerts see several changes racing.
        let n = self.created.len();
        let i = if self.rng.chance(80) { n - 1 - self.rng.below(n.min(16)) } else { self.rng.below(n) };
        self.created.get(i)
    }

    /// One of front thread `f`'s stored changes, any of them, reaches the shards' queues.
    fn hand_over_one(&mut self, f: usize) {
        if self.fronts[f].is_empty() {
            return;
        }
        let i = self.rng.below(self.fronts[f].len());
        let (row, change) = self.fronts[f].swap_remove(i);
        self.hand_over(&row, change);
    }

    fn hand_over_ended(&mut self) {
        let rows: Vec<AlertRow> = std::mem::take(&mut *self.ended.lock().expect("ended"));
        for row in rows {
            self.hand_over(&row, row.change(false));
        }
    }

    fn hand_over(&mut self, row: &AlertRow, mut change: AlertChange) {
        if self.unversioned {
            self.arrivals += 1;
            change.version = self.arrivals;
        }
        self.out.handed += 1;
        for _ in 0..1_000 {
            if self.commands.alert(row.exchange, &row.symbol, change).is_ok() {
                return;
            }
            // A full queue: the shards drain, as they do every millisecond.
            for s in 0..SHARDS {
                self.take_commands(s, usize::MAX);
            }
        }
        panic!("a shard's queue stayed full");
    }

    fn take_commands(&mut self, s: usize, n: usize) {
        let registry = self.shared.registry();
        let shard = &mut self.shards[s];
        for _ in 0..n {
            let Some(cmd) = shard.queue.pop() else { break };
            if shard.alerts.apply(&mut shard.market, None, &registry, &cmd) == Some(true) {
                let want = shard.market.books().iter().map(|b| b.alerts.len()).max().unwrap_or(0) + 64;
                shard.events.reserve(want);
            }
        }
    }

    /// A trade on a random book, its price a step of a random walk; its firings go to the
    /// writer on the shard's event queue.
    fn trade(&mut self) {
        self.out.trades += 1;
        let b = self.rng.below(PAIRS.len());
        let step = self.prices[b] / 1_000 * (self.rng.below(9) as i64 - 4);
        self.prices[b] = (self.prices[b] + step).clamp(PAIRS[b].4 * 9 / 10, PAIRS[b].4 * 11 / 10);
        let book = self.books[b];
        let s = self.shared.slots[book.index()].shard.load(Ordering::Relaxed) as usize;
        let tick = Tick {
            book,
            ts_ms: self.now(),
            kind: TickKind::Trade { price: Price(self.prices[b]), qty: Qty(1), taker_sell: step < 0 },
        };
        let shard = &mut self.shards[s];
        if let Outcome::Trade { .. } = shard.market.apply(&tick) {
            for k in 0..shard.market.firings().len() {
                let firing = shard.market.firings()[k];
                let universe = shard.alerts.is_universe(firing.id);
                shard.events.enqueue(ShardEvent::Fired { book, firing, universe });
            }
            shard.market.clear_firings();
            shard.events.flush();
            shard.events.wake();
        }
    }

    /// Everything in flight arrives: every stored change handed over, every queue taken, the
    /// writer's batches (and `*` bodies, and expiries) committed and their changes handed over,
    /// until a round moves nothing.
    fn settle(&mut self) {
        let mut quiet = 0;
        for _ in 0..200 {
            let mut moved = 0;
            for f in 0..FRONTS {
                while !self.fronts[f].is_empty() {
                    self.hand_over_one(f);
                    moved += 1;
                }
            }
            for s in 0..SHARDS {
                moved += self.shards[s].queue.len();
                self.take_commands(s, usize::MAX);
                self.shards[s].events.flush();
            }
            self.clock.advance(2_000);
            moved += self.writer_idle();
            let ended = self.ended.lock().expect("ended").len();
            moved += ended;
            self.hand_over_ended();
            quiet = if moved == 0 { quiet + 1 } else { 0 };
            if quiet >= 3 {
                return;
            }
        }
        panic!("the simulation did not settle");
    }

    /// Waits until the writer has committed everything queued for it; the batches it took.
    fn writer_idle(&self) -> usize {
        let stats = self.writer.as_ref().expect("writer").stats.clone();
        let started = stats.batches.load(Ordering::Acquire);
        let deadline = Instant::now() + Duration::from_secs(30);
        let (mut last, mut quiet) = (started, 0);
        loop {
            std::thread::sleep(Duration::from_millis(15));
            let now = stats.batches.load(Ordering::Acquire);
            let empty = self.shards.iter().all(|s| s.events.queue().is_empty());
            quiet = if empty && now == last { quiet + 1 } else { 0 };
            if quiet >= 2 {
                return (now - started) as usize;
            }
            last = now;
            assert!(Instant::now() < deadline, "the writer did not drain");
        }
    }

    /// Every alert's stored state against what the shards hold; one line per divergence.
    fn compare(&mut self) {
        let mut stored: BTreeMap<u64, AlertRow> = BTreeMap::new();
        for &account in &self.accounts {
            for row in self.store.list_alerts(account, StatusFilter::All).expect("list") {
                stored.insert(row.id as u64, row);
            }
        }
        // What the shards hold: (alert, book) → spec.
        let mut held: BTreeMap<u64, Vec<(BookId, AlertSpec)>> = BTreeMap::new();
        for shard in &self.shards {
            for book in shard.market.books() {
                for id in book.alerts.ids() {
                    let spec = book.alerts.spec(id).expect("a price or pct alert");
                    held.entry(id).or_default().push((book.id, spec));
                }
            }
        }
        let registry = self.shared.registry();
        for &(id, _) in &self.created {
            let id = id as u64;
            let on_shards = held.remove(&id).unwrap_or_default();
            let want: Vec<(BookId, AlertSpec)> = match stored.get(&id).filter(|r| r.running()) {
                None => Vec::new(),
                Some(row) => {
                    let spec = row.spec().expect("spec");
                    registry
                        .ids()
                        .filter(|&b| {
                            let ins = registry.get(b);
                            ins.venue == row.exchange && (row.symbol == UNIVERSE || ins.symbol == row.symbol)
                        })
                        .map(|b| (b, spec))
                        .collect()
                }
            };
            let mut got = on_shards;
            got.sort_by_key(|(b, _)| b.0);
            if got != want {
                let row = stored.get(&id);
                let applied: Vec<_> = self.shards.iter().map(|s| s.alerts.version(id)).collect();
                self.out.divergences.push(format!(
                    "alert {id}: stored {:?} (version {:?}), shards hold {:?} (last applied {applied:?}), want {:?}",
                    row.map(|r| (r.status, r.paused, r.cooldown_s)),
                    row.map(|r| r.version),
                    got,
                    want
                ));
            }
        }
        for (id, extra) in held {
            self.out.divergences.push(format!("alert {id} held but never created: {extra:?}"));
        }
    }

    fn finish(mut self) -> Outcomes {
        self.settle();
        // A commit the writer had to retry waited 100 ms: none may (a lock met, a bad batch).
        let retries = self.writer.as_ref().map_or(0, |w| w.stats.retries.load(Ordering::Acquire));
        if retries > 0 {
            let report = self.health.report(self.now());
            self.out.divergences.push(format!("the writer retried {retries} commits: {report:?}"));
        }
        // The writer stops once it has committed all it holds; what that ended reaches the shards.
        if let Some(w) = self.writer.take() {
            w.stop();
        }
        self.hand_over_ended();
        for s in 0..SHARDS {
            self.take_commands(s, usize::MAX);
        }
        self.compare();
        self.out
    }
}

fn ops() -> u64 {
    std::env::var("RAMPART_ORDER_OPS").ok().and_then(|s| s.parse().ok()).unwrap_or(3_000)
}

fn seeds(default: &[u64]) -> Vec<u64> {
    if let Ok(s) = std::env::var(rampart_testkit::rng::SEED_VAR) {
        return vec![s.parse().expect("a seed")];
    }
    match std::env::var("RAMPART_ORDER_SEEDS").ok().and_then(|s| s.parse::<u64>().ok()) {
        Some(n) => (1..=n).collect(),
        None => default.to_vec(),
    }
}

fn unversioned() -> bool {
    std::env::var("RAMPART_ORDER_UNVERSIONED").is_ok_and(|v| v == "1")
}

/// Runs one seed over a store `open` makes (twice: the front's and the writer's connection).
fn run(seed: u64, open: &dyn Fn() -> Store) -> Outcomes {
    let started = Instant::now();
    let mut world = World::new(seed, open(), open().for_background().expect("background"), unversioned());
    let n = ops();
    for _ in 0..n {
        world.step();
    }
    let out = world.finish();
    eprintln!(
        "seed {seed}: {} operations ({} creates, {} changes, {} deletes, {} hand-overs, {} trades) in {:.1} s: {} divergences",
        out.ops,
        out.creates,
        out.patches,
        out.deletes,
        out.handed,
        out.trades,
        started.elapsed().as_secs_f64(),
        out.divergences.len()
    );
    out
}

fn check(seed: u64, out: &Outcomes) {
    if unversioned() {
        return;
    }
    assert!(
        out.divergences.is_empty(),
        "seed {seed}: {} alerts whose shards hold another state than storage (replay: RAMPART_FUZZ_SEED={seed}):\n{}",
        out.divergences.len(),
        out.divergences.iter().take(20).cloned().collect::<Vec<_>>().join("\n")
    );
}

fn temp_dir(name: &str, seed: u64) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rampart-order-{name}-{seed}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[test]
fn every_alerts_shards_end_with_its_stored_state_on_sqlite() {
    for seed in seeds(&[1, 2, 3]) {
        let dir = temp_dir("sqlite", seed);
        let open = || Store::open(&dir).expect("open");
        let out = run(seed, &open);
        let _ = std::fs::remove_dir_all(&dir);
        check(seed, &out);
    }
}

#[test]
fn every_alerts_shards_end_with_its_stored_state_on_postgres() {
    let server = rampart_testkit::pg::server();
    for seed in seeds(&[11]) {
        let schema = server.fresh_schema_name();
        let admin = rampart_store::db::Db::postgres(&server.admin_url()).expect("connect as admin");
        admin.batch(&format!("CREATE SCHEMA {schema}")).expect("schema");
        let url = server.url_in_schema(&schema);
        let open = || Store::open_postgres(&url).expect("open");
        let out = run(seed, &open);
        check(seed, &out);
    }
}
