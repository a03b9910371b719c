//! One firing as the writer hands it to storage: a one-pair alert's, or a `*` alert's body
//! with the firings it collected (`decisions.md` §15).

/// One firing to persist.
#[derive(Clone, Debug)]
pub struct FiringRecord {
    /// Alert id.
    pub alert_id: i64,
    /// Trade price (fixed-point).
    pub price: i64,
    /// Signed move in hundredths of a percent, for pct alerts.
    pub move_hundredths: Option<i64>,
    /// Firing time.
    pub ts_ms: i64,
    /// The alert is done (not repeating): its status becomes `triggered`.
    pub last: bool,
    /// For a level alert, the level approached, touched or broken.
    pub level: Option<rampart_engine::level::Level>,
    /// For a wall alert, the wall.
    pub wall: Option<rampart_engine::firing::WallHit>,
    /// For a derivatives alert, what fired it (`decisions.md` §17).
    pub perp: Option<rampart_engine::firing::PerpTrigger>,
    /// The pair that fired, for a `*` alert's firing (its alert's symbol is `*`); `None` for a
    /// one-pair alert's.
    pub symbol: Option<String>,
    /// A `*` alert's body: the firings it carries, oldest first, each with its `symbol` (this
    /// record's own fields are the first's); empty for a one-pair alert's firing.
    pub triggers: Vec<FiringRecord>,
}

impl FiringRecord {
    /// A price alert's firing at `price` (fixed-point), `ts_ms`: no move, no level, no wall.
    pub fn at_price(alert_id: i64, price: i64, ts_ms: i64, last: bool) -> FiringRecord {
        FiringRecord {
            alert_id,
            price,
            move_hundredths: None,
            ts_ms,
            last,
            level: None,
            wall: None,
            perp: None,
            symbol: None,
            triggers: Vec::new(),
        }
    }

    /// A `*` alert's body carrying `triggers` (1 or more, oldest first): the first's fields
    /// with every one of them. A one-shot alert's first body is its last.
    pub fn collected(triggers: Vec<FiringRecord>) -> FiringRecord {
        assert!(!triggers.is_empty(), "a body carries at least one firing");
        let mut body = triggers[0].clone();
        body.last = triggers.iter().any(|t| t.last);
        body.triggers = triggers;
        body
    }
}
