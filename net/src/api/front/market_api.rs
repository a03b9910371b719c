//! `/v1/exchanges`, `/v1/exchanges/{exchange}/symbols`, `/v1/symbols/{symbol}`, `/v1/levels` and
//! `/v1/densities` (one pair or a venue): answers read from what the shards publish, with the
//! kept bodies of `bodies`.

use bytes::Bytes;
use hyper::StatusCode;
use rampart_engine::level::Level;
use rampart_engine::{BookId, Venue};

use super::*;
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

impl Front {
    pub(super) fn exchanges(&self) -> Resp {
        let mut j = Json::with_capacity(256);
        j.raw("{\"data\":[");
        for (i, v) in self.venues.iter().enumerate() {
            if i > 0 {
                j.raw(",");
            }
            j.raw("{\"exchange\":").str(v.as_str());
            j.raw(",\"pairs\":").int(self.listed_books(*v).len() as i64).raw("}");
        }
        j.raw("]}");
        respond(StatusCode::OK, j.finish())
    }

    pub(super) fn venue_or_404(&self, ex: &str) -> Result<Venue, ApiError> {
        match Venue::parse(ex) {
            Some(v) if self.venues.contains(&v) => Ok(v),
            Some(v) => {
                Err(ApiError::new(StatusCode::NOT_FOUND, format!("exchange '{v}' is not enabled on this server")))
            }
            None => Err(ApiError::new(
                StatusCode::NOT_FOUND,
                format!("unknown exchange '{}'. Allowed: {}", clip(ex, 64), Venue::ALLOWED),
            )),
        }
    }

    pub(super) fn symbols(&self, ex: &str, now_ms: i64) -> Resp {
        let venue = match self.venue_or_404(ex) {
            Ok(v) => v,
            Err(e) => return e.into_response(),
        };
        let reg = self.shared.registry();
        let books = self.listed_books(venue);
        let mut j = Json::with_capacity(64 + books.len() * 96);
        j.raw("{\"exchange\":").str(venue.as_str()).raw(",\"ts\":").int(now_ms).raw(",\"data\":[");
        for (i, &id) in books.iter().enumerate() {
            let ins = reg.get(id);
            let (price, _) = self.shared.price(id);
            if i > 0 {
                j.raw(",");
            }
            j.raw("{\"symbol\":").str(&ins.symbol);
            j.raw(",\"base\":").str(&ins.base);
            j.raw(",\"quote\":").str(&ins.quote);
            j.raw(",\"price\":").fixed(price);
            j.raw(",\"status\":").str(ins.status.as_str()).raw("}");
        }
        j.raw("]}");
        respond(StatusCode::OK, j.finish())
    }

    /// The book of `symbol` on `venue`, or the 404 for it: a pair the venue does not list, or
    /// no longer lists (delisted pairs are gone from every endpoint).
    pub(super) fn book(&self, venue: Venue, symbol: &str) -> Result<BookId, ApiError> {
        let upper = symbol.to_ascii_uppercase();
        // A book added after start is unknown until its shard has taken it (pending).
        let found = self
            .venues
            .contains(&venue)
            .then(|| self.shared.registry().find(venue, &upper))
            .flatten()
            .filter(|&id| self.shared.listed(id) || self.shared.delisted(id));
        match found {
            None => {
                Err(ApiError::new(StatusCode::NOT_FOUND, format!("unknown symbol '{}' on {venue}", clip(&upper, 64))))
            }
            Some(id) if self.shared.delisted(id) => Err(ApiError::new(
                StatusCode::NOT_FOUND,
                format!("symbol '{}' is delisted on {venue}", self.shared.registry().get(id).symbol),
            )),
            Some(id) => Ok(id),
        }
    }

    /// The books `venue` lists now (delisted ones left out), in the registry's symbol order.
    pub(super) fn listed_books(&self, venue: Venue) -> Vec<BookId> {
        let registry = self.shared.registry();
        registry.venue_books(venue).iter().copied().filter(|&b| self.shared.listed(b)).collect()
    }

    pub(super) fn levels_one(&self, venue: Venue, symbol: &str) -> Resp {
        let id = match self.book(venue, symbol) {
            Ok(id) => id,
            Err(e) => return e.into_response(),
        };
        respond_bytes(StatusCode::OK, self.levels_body(id))
    }

    /// `{"symbol":..,"data":[Level..]}` of one book: the single-pair answer and one entry of the
    /// bulk one, written once per version of what it depends on.
    pub(super) fn levels_body(&self, id: BookId) -> Bytes {
        let (snapshot, high, low) = self.shared.levels_view(id);
        let (price, _) = self.shared.price(id);
        let version = bodies::LevelsVersion { snapshot, high, low, price };
        self.levels_bodies.get_or_build(id.index(), version, |v| {
            let mut levels: Vec<Level> =
                v.snapshot.levels.iter().filter(|l| l.survives(v.high, v.low)).copied().collect();
            let mut j = Json::with_capacity(128 + levels.len() * 110);
            j.raw("{\"symbol\":").str(&self.shared.registry().get(id).symbol).raw(",\"data\":");
            write_levels(&mut j, &mut levels, v.price);
            j.raw("}");
            j.finish()
        })
    }

    pub(super) fn densities_one(&self, venue: Venue, symbol: &str) -> Resp {
        let id = match self.book(venue, symbol) {
            Ok(id) => id,
            Err(e) => return e.into_response(),
        };
        match self.densities_body(id) {
            Some(body) => respond_bytes(StatusCode::OK, body),
            None => {
                let registry = self.shared.registry();
                let name = &registry.get(id).symbol;
                error(StatusCode::NOT_FOUND, &format!("no walls on {name} ({venue}) at this moment"))
            }
        }
    }

    /// `{"symbol":..,"data":<Density>}` of one book, written once per scan; `None` without walls.
    pub(super) fn densities_body(&self, id: BookId) -> Option<Bytes> {
        let snap = self.shared.slots[id.index()].densities.load_full();
        if snap.walls.is_empty() {
            return None;
        }
        Some(self.densities_bodies.get_or_build(id.index(), bodies::DensitiesVersion(snap), |v| {
            let mut j = Json::with_capacity(128 + v.0.walls.len() * 160);
            j.raw("{\"symbol\":").str(&self.shared.registry().get(id).symbol).raw(",\"data\":");
            write_density(&mut j, &v.0);
            j.raw("}");
            j.finish()
        }))
    }

    pub(super) fn densities_bulk(&self, venue: Venue, filter: Option<&[String]>, now_ms: i64) -> Resp {
        let parts = |filter| -> Vec<Bytes> {
            let books = self.bulk_books(venue, filter);
            books.iter().filter_map(|&id| self.densities_body(id)).collect()
        };
        if filter.is_some() {
            return respond_bytes(StatusCode::OK, bulk_body(venue, now_ms, &parts(filter)));
        }
        // Loaded before any slot is read: see `bodies::GenerationCache`.
        let generation = self.shared.densities_generation.load(std::sync::atomic::Ordering::Acquire);
        let body = self
            .densities_bulk
            .get_or_build(venue.index(), (generation, now_ms), || bulk_body(venue, now_ms, &parts(None)));
        respond_bytes(StatusCode::OK, body)
    }

    /// The books a bulk request covers: the venue's, or the filter's that the venue lists,
    /// sorted by symbol, each once.
    pub(super) fn bulk_books(&self, venue: Venue, filter: Option<&[String]>) -> Vec<BookId> {
        let reg = self.shared.registry();
        if !self.venues.contains(&venue) {
            return Vec::new();
        }
        match filter {
            None => self.listed_books(venue),
            Some(list) => {
                let mut ids: Vec<BookId> =
                    list.iter().filter_map(|s| reg.find(venue, s)).filter(|&b| self.shared.listed(b)).collect();
                ids.sort_by(|a, b| reg.get(*a).symbol.cmp(&reg.get(*b).symbol));
                ids.dedup();
                ids
            }
        }
    }

    pub(super) fn levels_bulk(&self, venue: Venue, filter: Option<&[String]>, now_ms: i64) -> Resp {
        let books = self.bulk_books(venue, filter);
        let parts: Vec<Bytes> = books.iter().map(|&id| self.levels_body(id)).collect();
        respond_bytes(StatusCode::OK, bulk_body(venue, now_ms, &parts))
    }

    pub(super) fn symbol(&self, venue: Venue, symbol: &str) -> Resp {
        let id = match self.book(venue, symbol) {
            Ok(id) => id,
            Err(e) => return e.into_response(),
        };
        let registry = self.shared.registry();
        let ins = registry.get(id);
        let (price, ts) = self.shared.price(id);
        let mut j = Json::with_capacity(256);
        j.raw("{\"symbol\":").str(&ins.symbol).raw(",\"exchange\":").str(venue.as_str());
        j.raw(",\"data\":{\"base\":").str(&ins.base).raw(",\"quote\":").str(&ins.quote);
        j.raw(",\"price\":").fixed(price).raw(",\"status\":").str(ins.status.as_str());
        j.raw(",\"tickSize\":")
            .fixed(ins.tick.0)
            .raw(",\"lotSize\":")
            .fixed(i64::try_from(ins.lot.0).unwrap_or(i64::MAX));
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
