//! The books a request can name: the venues this process serves, the pairs each lists now (what
//! the shards published), and the shard that owns a book, asked through its command queue. Every
//! resource that names a pair finds it here, so a delisted or unknown pair is the same 404 on
//! every route and stream.

use std::sync::Arc;

use hyper::StatusCode;
use rampart_engine::{BookId, Venue};
use rampart_state::{Command, Commands, Shared};
use rampart_store::store::AlertRow;

use super::answer::{clip, ApiError, SHARD_ANSWER_TIMEOUT};
use crate::stream::ops::Channel;

/// What the shards publish, the venues served, and the shards' command queues.
pub struct Books {
    pub(super) shared: Arc<Shared>,
    pub(super) venues: Vec<Venue>,
    commands: Commands,
    /// An api node's view of the partitions (which one owns a book, how fresh it is), to say
    /// why a query went unanswered; `None` elsewhere.
    cluster: Option<(Arc<rampart_cluster::node::NodeHealth>, rampart_state::clock::SharedClock)>,
}

impl Books {
    /// The books of `shared` on `venues`, their shards reached through `commands`.
    pub(super) fn new(shared: Arc<Shared>, venues: Vec<Venue>, commands: Commands) -> Books {
        Books { shared, venues, commands, cluster: None }
    }

    /// On an api node: queries name the partition that did not answer, and why.
    pub(super) fn with_cluster(
        mut self,
        cluster: Option<Arc<rampart_cluster::node::NodeHealth>>,
        clock: rampart_state::clock::SharedClock,
    ) -> Books {
        self.cluster = cluster.filter(|c| c.role == rampart_cluster::node::Role::Api).map(|c| (c, clock));
        self
    }

    /// The 503 of a query `book`'s shard did not answer: "busy", or on an api node the
    /// partition whose market node is away (its snapshots stale) or unreached.
    fn unanswered(&self, book: BookId) -> ApiError {
        let Some((c, clock)) = &self.cluster else {
            return ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "busy; retry shortly");
        };
        let symbol = self.shared.registry().get(book).symbol.clone();
        let p = rampart_state::partition::of_symbol(&symbol, c.partition.count);
        let now_ms = clock.now_ms();
        let why = match c.age_ms(usize::from(p), now_ms) {
            Some(age) if c.stale_partitions(now_ms).contains(&p) => {
                format!(
                    "partition {p} ({symbol}) has no market node serving it: its last snapshot is {} s old",
                    age / 1000
                )
            }
            None => format!("partition {p} ({symbol}) has no market node serving it: no snapshot yet"),
            Some(_) => format!("partition {p} ({symbol}) did not answer in time"),
        };
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, format!("{why}; retry shortly"))
    }

    /// `ex` as a venue this process serves, or the 404 naming why not.
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

    /// The first served venue (in `Venue::ALL`'s order) listing `symbol`, with its book.
    pub(super) fn any_venue(&self, symbol: &str) -> Option<(Venue, BookId)> {
        Venue::ALL
            .into_iter()
            .filter(|v| self.venues.contains(v))
            .find_map(|v| self.shared.registry().find(v, symbol).filter(|&b| self.shared.listed(b)).map(|b| (v, b)))
    }

    /// The books `venue` lists now (delisted ones left out), in the registry's symbol order.
    pub(super) fn listed_books(&self, venue: Venue) -> Vec<BookId> {
        let registry = self.shared.registry();
        registry.venue_books(venue).iter().copied().filter(|&b| self.shared.listed(b)).collect()
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

    /// Why `c` cannot be subscribed on this server, if it cannot.
    pub(super) fn unknown_channel(&self, c: &Channel) -> Option<String> {
        match c {
            Channel::Price { venue, symbol }
            | Channel::Levels { venue, symbol: Some(symbol) }
            | Channel::Walls { venue, symbol: Some(symbol) } => self.book(*venue, symbol).err().map(|e| e.message),
            Channel::Levels { venue, symbol: None } | Channel::Walls { venue, symbol: None } => {
                self.venue_or_404(venue.as_str()).err().map(|e| e.message)
            }
            Channel::Board { venue } => self.venue_or_404(venue.as_str()).err().map(|e| e.message),
            Channel::Alerts => None,
            Channel::Liquidations { venue, symbol: Some(symbol) } | Channel::Perp { venue, symbol: Some(symbol) } => {
                self.perp_book(*venue, symbol).err().map(|e| e.message)
            }
            Channel::Liquidations { venue, symbol: None } | Channel::Perp { venue, symbol: None } => {
                self.venue_or_404(venue.as_str()).err().map(|e| e.message)
            }
        }
    }

    /// The book of `symbol` on `venue` if its pair has a perpetual there; else the refusal of the
    /// derivatives reads: the pair unknown, or `no perpetual contract for 'X' on okx` (§17).
    fn perp_book(&self, venue: Venue, symbol: &str) -> Result<BookId, ApiError> {
        let id = self.book(venue, symbol)?;
        if self.shared.slots[id.index()].perp.load().is_none() {
            let name = self.shared.registry().get(id).symbol.clone();
            return Err(ApiError::new(StatusCode::NOT_FOUND, format!("no perpetual contract for '{name}' on {venue}")));
        }
        Ok(id)
    }

    /// The books a price, levels or walls channel covers now (a `*` channel: the venue's listed
    /// pairs; the fan-out follows the venue's listing from then on).
    pub(super) fn books_of(&self, c: &Channel) -> Vec<BookId> {
        match c {
            Channel::Price { venue, symbol }
            | Channel::Levels { venue, symbol: Some(symbol) }
            | Channel::Walls { venue, symbol: Some(symbol) } => self.book(*venue, symbol).ok().into_iter().collect(),
            Channel::Liquidations { venue, symbol: Some(symbol) } | Channel::Perp { venue, symbol: Some(symbol) } => {
                self.perp_book(*venue, symbol).ok().into_iter().collect()
            }
            Channel::Levels { venue, symbol: None }
            | Channel::Walls { venue, symbol: None }
            | Channel::Liquidations { venue, symbol: None }
            | Channel::Perp { venue, symbol: None } => self.listed_books(*venue),
            Channel::Board { .. } | Channel::Alerts => Vec::new(),
        }
    }

    /// Hands `change`, what the stored write that made `row` changed, to the shards that evaluate
    /// the alert (its book's, every shard for a `*` alert): held, resumed or gone, with the row's
    /// version, so the shards apply the stored changes
    /// of one alert in storage's order whatever the order they arrive in (`decisions.md` §16,
    /// "One order"). False when a queue had no room (stored: a retry of the change hands it over
    /// then). An alert on a pair not served now needs nothing (it is loaded once its venue lists
    /// the pair).
    pub(super) fn hand_over(&self, row: &AlertRow, change: rampart_state::AlertChange) -> bool {
        self.commands.alert(row.exchange, &row.symbol, change).is_ok()
    }

    /// Hands a new alert to its shards; false when a queue had no room, after telling the shards
    /// that took it (a `*` alert's) that it is gone again: the caller forgets the row, so nothing
    /// unacknowledged stays behind.
    pub(super) fn hand_over_new(&self, row: &AlertRow) -> bool {
        if self.hand_over(row, row.change(false)) {
            return true;
        }
        let undone = rampart_state::AlertChange::gone(row.id.unsigned_abs(), row.version + 1);
        let _ = self.commands.alert(row.exchange, &row.symbol, undone);
        false
    }

    /// Asks the shard owning `book` and waits for the answer, at most [`SHARD_ANSWER_TIMEOUT`].
    pub(super) async fn ask_shard<T>(
        &self,
        book: BookId,
        make: impl FnOnce(tokio::sync::oneshot::Sender<T>) -> Command,
    ) -> Result<T, ApiError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.commands.send(book, make(tx)).map_err(|_| self.unanswered(book))?;
        match tokio::time::timeout(SHARD_ANSWER_TIMEOUT, rx).await {
            Ok(Ok(v)) => Ok(v),
            _ => Err(self.unanswered(book)),
        }
    }
}
