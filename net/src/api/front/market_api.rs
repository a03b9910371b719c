//! `/v1/exchanges`, `/v1/exchanges/{exchange}/symbols`, `/v1/symbols/{symbol}`, `/v1/levels`,
//! `/v1/densities`, the wall history `/v1/walls/…/history` (one pair or a venue) and the
//! derivatives reads `/v1/perp…` and `/v1/liquidations…` (`perp`): answers read from what the
//! shards publish, with the kept bodies of `bodies`.

use bytes::Bytes;
use hyper::StatusCode;
use rampart_engine::level::Level;
use rampart_engine::{BookId, Venue};

use std::rc::Rc;

use super::answer::{answer_ok, error, respond, respond_bytes, Resp};
use super::bodies;
use super::books::Books;
use super::wall_history;
use super::{perp, perp_json};
use rampart_state::clock::SharedClock;
use rampart_state::json::Json;
use rampart_state::market_json::{write_density, write_levels};

/// A bulk answer, `{"exchange":..,"ts":..,"data":[part,..]}`, from per-pair bodies already
/// written (copied once into the answer).
pub(super) fn bulk_body(venue: Venue, now_ms: i64, parts: &[Bytes]) -> Bytes {
    let mut head = Json::with_capacity(64);
    head.raw("{\"exchange\":").str(venue.as_str()).raw(",\"ts\":").int(now_ms).raw(",\"data\":[");
    let head = head.finish();
    let mut out = Vec::with_capacity(head.len() + 2 + parts.iter().map(|p| p.len() + 1).sum::<usize>());
    out.extend_from_slice(head.as_bytes());
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(p);
    }
    out.extend_from_slice(b"]}");
    Bytes::from(out)
}

/// The market's published state as `/v1` answers it, with the bodies kept while their
/// versions hold.
pub struct MarketApi {
    books: Rc<Books>,
    clock: SharedClock,
    /// Single-pair levels bodies, per book, reused while their version holds.
    levels_bodies: bodies::BodyCache<bodies::LevelsVersion>,
    /// Single-pair densities bodies, likewise.
    densities_bodies: bodies::BodyCache<bodies::DensitiesVersion>,
    /// The unfiltered bulk densities answer per venue, kept while `Shared::densities_generation`
    /// and the millisecond hold.
    densities_bulk: bodies::GenerationCache,
}

impl MarketApi {
    /// Answers from `books`, with room for a body of every book the registry can hold.
    pub(super) fn new(books: Rc<Books>, clock: SharedClock) -> MarketApi {
        let capacity = books.shared.capacity;
        MarketApi {
            books,
            clock,
            levels_bodies: bodies::BodyCache::new(capacity),
            densities_bodies: bodies::BodyCache::new(capacity),
            densities_bulk: bodies::GenerationCache::new(Venue::COUNT),
        }
    }

    pub(super) fn exchanges(&self) -> Resp {
        let mut j = Json::with_capacity(256);
        j.raw("{\"data\":[");
        for (i, v) in self.books.venues.iter().enumerate() {
            if i > 0 {
                j.raw(",");
            }
            j.raw("{\"exchange\":").str(v.as_str());
            j.raw(",\"pairs\":").int(self.books.listed_books(*v).len() as i64).raw("}");
        }
        j.raw("]}");
        respond(StatusCode::OK, j.finish())
    }

    pub(super) fn symbols(&self, ex: &str, now_ms: i64) -> Resp {
        let venue = match self.books.venue_or_404(ex) {
            Ok(v) => v,
            Err(e) => return e.into_response(),
        };
        let reg = self.books.shared.registry();
        let books = self.books.listed_books(venue);
        let mut j = Json::with_capacity(64 + books.len() * 96);
        j.raw("{\"exchange\":").str(venue.as_str()).raw(",\"ts\":").int(now_ms).raw(",\"data\":[");
        for (i, &id) in books.iter().enumerate() {
            let ins = reg.get(id);
            let (price, _) = self.books.shared.price(id);
            if i > 0 {
                j.raw(",");
            }
            j.raw("{\"symbol\":").str(&ins.symbol);
            j.raw(",\"base\":").str(&ins.base);
            j.raw(",\"quote\":").str(&ins.quote);
            j.raw(",\"price\":").fixed(price);
            j.raw(",\"status\":").str(ins.status.as_str());
            perp_json::write_perp_ref(&mut j, self.books.shared.slots[id.index()].perp.load().as_deref());
            j.raw("}");
        }
        j.raw("]}");
        respond(StatusCode::OK, j.finish())
    }

    pub(super) fn levels_one(&self, venue: Venue, symbol: &str) -> Resp {
        let id = match self.books.book(venue, symbol) {
            Ok(id) => id,
            Err(e) => return e.into_response(),
        };
        respond_bytes(StatusCode::OK, self.levels_body(id))
    }

    /// `{"symbol":..,"data":[Level..]}` of one book: the single-pair answer and one entry of the
    /// bulk one, written once per version of what it depends on.
    pub(super) fn levels_body(&self, id: BookId) -> Bytes {
        let (snapshot, high, low) = self.books.shared.levels_view(id);
        let (price, _) = self.books.shared.price(id);
        let version = bodies::LevelsVersion { snapshot, high, low, price };
        self.levels_bodies.get_or_build(id.index(), version, |v| {
            let mut levels: Vec<Level> =
                v.snapshot.levels.iter().filter(|l| l.survives(v.high, v.low)).copied().collect();
            let mut j = Json::with_capacity(128 + levels.len() * 110);
            j.raw("{\"symbol\":").str(&self.books.shared.registry().get(id).symbol).raw(",\"data\":");
            write_levels(&mut j, &mut levels, v.price);
            j.raw("}");
            j.finish()
        })
    }

    pub(super) fn densities_one(&self, venue: Venue, symbol: &str) -> Resp {
        let id = match self.books.book(venue, symbol) {
            Ok(id) => id,
            Err(e) => return e.into_response(),
        };
        match self.densities_body(id) {
            Some(body) => respond_bytes(StatusCode::OK, body),
            None => {
                let registry = self.books.shared.registry();
                let name = &registry.get(id).symbol;
                error(StatusCode::NOT_FOUND, &format!("no walls on {name} ({venue}) at this moment"))
            }
        }
    }

    /// `{"symbol":..,"data":<Density>}` of one book, written once per scan; `None` without walls.
    pub(super) fn densities_body(&self, id: BookId) -> Option<Bytes> {
        let snap = self.books.shared.slots[id.index()].densities.load_full();
        if snap.walls.is_empty() {
            return None;
        }
        Some(self.densities_bodies.get_or_build(id.index(), bodies::DensitiesVersion(snap), |v| {
            let mut j = Json::with_capacity(128 + v.0.walls.len() * 160);
            j.raw("{\"symbol\":").str(&self.books.shared.registry().get(id).symbol).raw(",\"data\":");
            write_density(&mut j, &v.0);
            j.raw("}");
            j.finish()
        }))
    }

    pub(super) fn densities_bulk(&self, venue: Venue, filter: Option<&[String]>, now_ms: i64) -> Resp {
        let parts = |filter| -> Vec<Bytes> {
            let books = self.books.bulk_books(venue, filter);
            books.iter().filter_map(|&id| self.densities_body(id)).collect()
        };
        if filter.is_some() {
            return respond_bytes(StatusCode::OK, bulk_body(venue, now_ms, &parts(filter)));
        }
        // Loaded before any slot is read: see `bodies::GenerationCache`.
        let generation = self.books.shared.densities_generation.load(std::sync::atomic::Ordering::Acquire);
        let body = self
            .densities_bulk
            .get_or_build(venue.index(), (generation, now_ms), || bulk_body(venue, now_ms, &parts(None)));
        respond_bytes(StatusCode::OK, body)
    }

    /// `GET /v1/walls/{symbol}/history`: the pair's walls of the last 24 h, newest first.
    pub(super) fn wall_history_one(&self, venue: Venue, symbol: &str, query: Option<&str>, now_ms: i64) -> Resp {
        let q = match wall_history::pair_query(query) {
            Ok(q) => q,
            Err(e) => return e.into_response(),
        };
        let id = match self.books.book(venue, symbol) {
            Ok(id) => id,
            Err(e) => return e.into_response(),
        };
        let history = self.books.shared.slots[id.index()].wall_history.load();
        let registry = self.books.shared.registry();
        respond(StatusCode::OK, wall_history::pair_body(&registry.get(id).symbol, &history, &q, now_ms))
    }

    /// `GET /v1/walls/history`: the venue's walls of the last 24 h, newest first, each with its
    /// pair.
    pub(super) fn wall_history_bulk(&self, venue: Venue, query: Option<&str>, now_ms: i64) -> Resp {
        let q = match wall_history::venue_query(query) {
            Ok(q) => q,
            Err(e) => return e.into_response(),
        };
        let books = self.books.bulk_books(venue, None);
        let loaded: Vec<_> =
            books.iter().map(|b| self.books.shared.slots[b.index()].wall_history.load_full()).collect();
        let histories: Vec<&rampart_state::wall_history::WallHistory> = loaded.iter().map(|h| &**h).collect();
        let walls = wall_history::newest(&histories, &q, now_ms);
        let registry = self.books.shared.registry();
        let body = wall_history::venue_body(venue.as_str(), &walls, |k| registry.get(books[k]).symbol.as_str(), now_ms);
        respond(StatusCode::OK, body)
    }

    /// `GET /v1/perp/{symbol}`: the pair's perpetual (decisions §17).
    pub(super) fn perp_one(&self, symbol: &str, query: Option<&str>) -> Resp {
        answer_ok(perp::one(&self.books, symbol, query))
    }

    /// `GET /v1/perp/{symbol}/history`: one window's 60 slots, copied by the owning shard.
    pub(super) async fn perp_history(&self, symbol: &str, query: Option<&str>) -> Resp {
        answer_ok(perp::history(&self.books, symbol, query).await)
    }

    /// `GET /v1/perp`: every pair of the venue with a perpetual.
    pub(super) fn perp_bulk(&self, query: Option<&str>, now_ms: i64) -> Resp {
        answer_ok(perp::bulk(&self.books, query, now_ms))
    }

    /// `GET /v1/liquidations/{symbol}`: the pair's liquidations of the last 24 h, newest first.
    pub(super) fn liquidations_one(&self, symbol: &str, query: Option<&str>, now_ms: i64) -> Resp {
        answer_ok(perp::liquidations_one(&self.books, symbol, query, now_ms))
    }

    /// `GET /v1/liquidations`: the venue's newest liquidations across its pairs.
    pub(super) fn liquidations_bulk(&self, query: Option<&str>, now_ms: i64) -> Resp {
        answer_ok(perp::liquidations_bulk(&self.books, query, now_ms))
    }

    pub(super) fn levels_bulk(&self, venue: Venue, filter: Option<&[String]>, now_ms: i64) -> Resp {
        let books = self.books.bulk_books(venue, filter);
        let parts: Vec<Bytes> = books.iter().map(|&id| self.levels_body(id)).collect();
        respond_bytes(StatusCode::OK, bulk_body(venue, now_ms, &parts))
    }

    pub(super) fn symbol(&self, venue: Venue, symbol: &str) -> Resp {
        let id = match self.books.book(venue, symbol) {
            Ok(id) => id,
            Err(e) => return e.into_response(),
        };
        let registry = self.books.shared.registry();
        let ins = registry.get(id);
        let (price, ts) = self.books.shared.price(id);
        let mut j = Json::with_capacity(256);
        j.raw("{\"symbol\":").str(&ins.symbol).raw(",\"exchange\":").str(venue.as_str());
        j.raw(",\"data\":{\"base\":").str(&ins.base).raw(",\"quote\":").str(&ins.quote);
        j.raw(",\"price\":").fixed(price).raw(",\"status\":").str(ins.status.as_str());
        j.raw(",\"tickSize\":")
            .fixed(ins.tick.0)
            .raw(",\"lotSize\":")
            .fixed(i64::try_from(ins.lot.0).unwrap_or(i64::MAX));
        perp_json::write_perp_ref(&mut j, self.books.shared.slots[id.index()].perp.load().as_deref());
        j.raw(",\"ts\":").int(ts);
        // How old the price is: a venue that went quiet shows here before anywhere else.
        j.raw(",\"priceAgeMs\":");
        if ts > 0 {
            j.int((self.clock.now_ms() - ts).max(0));
        } else {
            j.raw("null");
        }
        j.raw("}}");
        respond(StatusCode::OK, j.finish())
    }
}
