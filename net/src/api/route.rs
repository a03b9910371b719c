//! The one dispatch of the API port (style §26, issue #46): [`Route::parse`] turns a method and
//! a path into the route that answers it, or into the refusal: 404, or 405 with the `Allow` the
//! same table gives. Pure: no socket, no key, no clock; the front acts on what it says
//! (`api::front`: the public routes at once, `/v1` routes after the key is admitted, the site's
//! `/site/…` routes after its session; only the site's pages and assets lie outside the table).
//!
//! Every resource is one row of `Resource::methods`: the methods it takes, in the order
//! `Allow` names them, and the route each one is. `HEAD` is answered as `GET` wherever `GET` is.

use hyper::Method;

/// What answers a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route<'a> {
    /// `GET /healthz`.
    Healthz,
    /// `GET /livez` (issue #50).
    Livez,
    /// `GET /readyz` (issue #50).
    Readyz,
    /// `GET /openapi.json`.
    OpenApi,
    /// `GET /version`.
    Version,
    /// `GET /metrics` (when it is served on the API's listener).
    Metrics,
    /// `/v1/stream`: a WebSocket upgrade or server-sent events (the method is checked there).
    Stream,
    /// `/site/v1/stream`: the site pages' event stream.
    SiteStream,
    /// `GET /site/events`: the site's live inbox.
    SiteEvents,
    /// `POST /site/signin`.
    SignIn,
    /// `POST /site/signout`.
    SignOut,
    /// `GET /site/session`.
    Session,
    /// `GET /site/site-alerts`.
    ListSiteAlerts,
    /// `POST /site/site-alerts`.
    CreateSiteAlert,
    /// `DELETE /site/site-alerts/{id}`.
    DeleteSiteAlert(&'a str),
    /// `/site/v1/…`: the `/v1` route with the session's key (that route checks the method).
    SiteV1,
    /// `GET /site/keys`.
    ListKeys,
    /// `POST /site/keys`.
    AddKey,
    /// `DELETE /site/keys/{id}`.
    RevokeKey(&'a str),
    /// `GET /site/channels`.
    Channels,
    /// `PUT /site/channels`.
    SetChannels,
    /// `GET /v1/exchanges`.
    Exchanges,
    /// `GET /v1/exchanges/{exchange}/symbols`.
    ExchangeSymbols(&'a str),
    /// `GET /v1/symbols/{symbol}`.
    Symbol(&'a str),
    /// `GET /v1/levels`.
    LevelsBulk,
    /// `GET /v1/levels/{symbol}`.
    Levels(&'a str),
    /// `GET /v1/densities`.
    DensitiesBulk,
    /// `GET /v1/densities/{symbol}`.
    Densities(&'a str),
    /// `GET /v1/walls/history`.
    WallHistoryBulk,
    /// `GET /v1/walls/{symbol}/history`.
    WallHistory(&'a str),
    /// `GET /v1/metrics`.
    MetricsBulk,
    /// `GET /v1/metrics/{symbol}`.
    MetricsOne(&'a str),
    /// `GET /v1/candles/{symbol}`.
    Candles(&'a str),
    /// `GET /v1/book/{symbol}`.
    Book(&'a str),
    /// `GET /v1/rankings/{category}`.
    Rankings(&'a str),
    /// `GET /v1/market`.
    Market,
    /// `GET /v1/perp`.
    PerpBulk,
    /// `GET /v1/perp/{symbol}`.
    Perp(&'a str),
    /// `GET /v1/perp/{symbol}/history`.
    PerpHistory(&'a str),
    /// `GET /v1/liquidations`.
    LiquidationsBulk,
    /// `GET /v1/liquidations/{symbol}`.
    Liquidations(&'a str),
    /// `GET /v1/alerts`.
    ListAlerts,
    /// `POST /v1/alerts`.
    CreateAlert,
    /// `PATCH /v1/alerts/{id}`.
    UpdateAlert(&'a str),
    /// `DELETE /v1/alerts/{id}`.
    DeleteAlert(&'a str),
    /// `GET /v1/alerts/{id}/deliveries`.
    DeliveryLog(&'a str),
    /// `POST /v1/alerts/{id}/deliveries/{triggerTime}/redeliver`.
    Redeliver(&'a str, &'a str),
    /// `POST /v1/alerts/{id}/test`.
    TestAlert(&'a str),
    /// `GET /v1/webhook-secret`.
    WebhookSigning,
    /// `POST /v1/webhook-secret`.
    RotateWebhookSecret,
    /// `DELETE /v1/webhook-secret`.
    EndWebhookSecret,
    /// `GET /v1/inbox`.
    Inbox,
    /// `GET /v1/debug/latency`.
    Latency,
    /// `DELETE /v1/debug/latency` (operators only).
    LatencyReset,
}

/// Why a path has no route for a method.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotRouted {
    /// No resource at this path: 404.
    NotFound,
    /// The resource takes other methods: 405 with these in `Allow`.
    MethodNotAllowed(String),
}

/// Which part of the port a path belongs to, and so what is asked before its route is acted on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// `/healthz`, `/openapi.json`, `/version`, `/metrics`: no key.
    Public,
    /// `/v1` and below: the key first, then the route (a client without a key learns nothing
    /// of the paths, not even a 404).
    Keyed,
    /// `/site/…`: the site's session.
    Site,
    /// Anything else: the site's pages and assets, or 404.
    Other,
}

/// The family of `path`.
pub fn family(path: &str) -> Family {
    match path {
        "/healthz" | "/livez" | "/readyz" | "/openapi.json" | "/version" | "/metrics" => Family::Public,
        "/v1" => Family::Keyed,
        p if p.starts_with("/v1/") => Family::Keyed,
        p if p.starts_with("/site/") => Family::Site,
        _ => Family::Other,
    }
}

/// A method as the table knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verb {
    /// `GET`, and `HEAD` with it.
    Get,
    Post,
    Put,
    Patch,
    Delete,
}

impl Verb {
    fn of(method: &Method) -> Option<Verb> {
        match *method {
            Method::GET | Method::HEAD => Some(Verb::Get),
            Method::POST => Some(Verb::Post),
            Method::PUT => Some(Verb::Put),
            Method::PATCH => Some(Verb::Patch),
            Method::DELETE => Some(Verb::Delete),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Verb::Get => "GET",
            Verb::Post => "POST",
            Verb::Put => "PUT",
            Verb::Patch => "PATCH",
            Verb::Delete => "DELETE",
        }
    }
}

/// A path's resource, with the segments it names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Resource<'a> {
    Healthz,
    Livez,
    Readyz,
    OpenApi,
    Version,
    Metrics,
    Stream,
    SiteStream,
    SiteEvents,
    SignIn,
    SignOut,
    Session,
    SiteAlerts,
    SiteAlert(&'a str),
    SiteV1,
    Keys,
    Key(&'a str),
    Channels,
    Exchanges,
    ExchangeSymbols(&'a str),
    Symbol(&'a str),
    Levels(Option<&'a str>),
    Densities(Option<&'a str>),
    WallHistory(Option<&'a str>),
    MetricsOf(Option<&'a str>),
    Candles(&'a str),
    Book(&'a str),
    Rankings(&'a str),
    Market,
    Perp(Option<&'a str>),
    PerpHistory(&'a str),
    Liquidations(Option<&'a str>),
    Alerts,
    Alert(&'a str),
    Deliveries(&'a str),
    Redeliver(&'a str, &'a str),
    TestAlert(&'a str),
    WebhookSecret,
    Inbox,
    Latency,
}

impl<'a> Resource<'a> {
    /// The resource at `path`, if any.
    fn at(path: &'a str) -> Option<Resource<'a>> {
        use Resource as R;
        let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        Some(match segments.as_slice() {
            ["healthz"] => R::Healthz,
            ["livez"] => R::Livez,
            ["readyz"] => R::Readyz,
            ["openapi.json"] => R::OpenApi,
            ["version"] => R::Version,
            ["metrics"] => R::Metrics,
            ["v1", "stream"] => R::Stream,
            ["site", "v1", "stream"] => R::SiteStream,
            ["site", "events"] => R::SiteEvents,
            ["site", "signin"] => R::SignIn,
            ["site", "signout"] => R::SignOut,
            ["site", "session"] => R::Session,
            ["site", "site-alerts"] => R::SiteAlerts,
            ["site", "site-alerts", id] => R::SiteAlert(id),
            ["site", "v1", ..] => R::SiteV1,
            ["site", "keys"] => R::Keys,
            ["site", "keys", id] => R::Key(id),
            ["site", "channels"] => R::Channels,
            ["v1", "exchanges"] => R::Exchanges,
            ["v1", "exchanges", ex, "symbols"] => R::ExchangeSymbols(ex),
            ["v1", "symbols", s] => R::Symbol(s),
            ["v1", "levels"] => R::Levels(None),
            ["v1", "levels", s] => R::Levels(Some(s)),
            ["v1", "densities"] => R::Densities(None),
            ["v1", "densities", s] => R::Densities(Some(s)),
            ["v1", "walls", "history"] => R::WallHistory(None),
            ["v1", "walls", s, "history"] => R::WallHistory(Some(s)),
            ["v1", "metrics"] => R::MetricsOf(None),
            ["v1", "metrics", s] => R::MetricsOf(Some(s)),
            ["v1", "candles", s] => R::Candles(s),
            ["v1", "book", s] => R::Book(s),
            ["v1", "rankings", c] => R::Rankings(c),
            ["v1", "market"] => R::Market,
            ["v1", "perp"] => R::Perp(None),
            ["v1", "perp", s] => R::Perp(Some(s)),
            ["v1", "perp", s, "history"] => R::PerpHistory(s),
            ["v1", "liquidations"] => R::Liquidations(None),
            ["v1", "liquidations", s] => R::Liquidations(Some(s)),
            ["v1", "alerts"] => R::Alerts,
            ["v1", "alerts", id] => R::Alert(id),
            ["v1", "alerts", id, "deliveries"] => R::Deliveries(id),
            ["v1", "alerts", id, "deliveries", at, "redeliver"] => R::Redeliver(id, at),
            ["v1", "alerts", id, "test"] => R::TestAlert(id),
            ["v1", "webhook-secret"] => R::WebhookSecret,
            ["v1", "inbox"] => R::Inbox,
            ["v1", "debug", "latency"] => R::Latency,
            _ => return None,
        })
    }

    /// Its template, as `docs/openapi.json` names it (the route label of `/metrics`; the site's
    /// `/site/v1/…` as one).
    fn template(self) -> &'static str {
        use Resource as R;
        match self {
            R::Healthz => "/healthz",
            R::Livez => "/livez",
            R::Readyz => "/readyz",
            R::OpenApi => "/openapi.json",
            R::Version => "/version",
            R::Metrics => "/metrics",
            R::Stream => "/v1/stream",
            R::SiteStream | R::SiteV1 => "/site/v1/*",
            R::SiteEvents => "/site/events",
            R::SignIn => "/site/signin",
            R::SignOut => "/site/signout",
            R::Session => "/site/session",
            R::SiteAlerts => "/site/site-alerts",
            R::SiteAlert(_) => "/site/site-alerts/{id}",
            R::Keys => "/site/keys",
            R::Key(_) => "/site/keys/{id}",
            R::Channels => "/site/channels",
            R::Exchanges => "/v1/exchanges",
            R::ExchangeSymbols(_) => "/v1/exchanges/{exchange}/symbols",
            R::Symbol(_) => "/v1/symbols/{symbol}",
            R::Levels(None) => "/v1/levels",
            R::Levels(Some(_)) => "/v1/levels/{symbol}",
            R::Densities(None) => "/v1/densities",
            R::Densities(Some(_)) => "/v1/densities/{symbol}",
            R::WallHistory(None) => "/v1/walls/history",
            R::WallHistory(Some(_)) => "/v1/walls/{symbol}/history",
            R::MetricsOf(None) => "/v1/metrics",
            R::MetricsOf(Some(_)) => "/v1/metrics/{symbol}",
            R::Candles(_) => "/v1/candles/{symbol}",
            R::Book(_) => "/v1/book/{symbol}",
            R::Rankings(_) => "/v1/rankings/{category}",
            R::Market => "/v1/market",
            R::Perp(None) => "/v1/perp",
            R::Perp(Some(_)) => "/v1/perp/{symbol}",
            R::PerpHistory(_) => "/v1/perp/{symbol}/history",
            R::Liquidations(None) => "/v1/liquidations",
            R::Liquidations(Some(_)) => "/v1/liquidations/{symbol}",
            R::Alerts => "/v1/alerts",
            R::Alert(_) => "/v1/alerts/{id}",
            R::Deliveries(_) => "/v1/alerts/{id}/deliveries",
            R::Redeliver(..) => "/v1/alerts/{id}/deliveries/{triggerTime}/redeliver",
            R::TestAlert(_) => "/v1/alerts/{id}/test",
            R::WebhookSecret => "/v1/webhook-secret",
            R::Inbox => "/v1/inbox",
            R::Latency => "/v1/debug/latency",
        }
    }

    /// The methods it takes, in `Allow`'s order, each with its route; `None`: every method
    /// goes to the route (it checks the method itself).
    fn methods(self) -> Result<Vec<(Verb, Route<'a>)>, Route<'a>> {
        use Route as T;
        use Verb::{Delete, Get, Patch, Post, Put};
        Ok(match self {
            Resource::Stream => return Err(T::Stream),
            Resource::SiteStream => return Err(T::SiteStream),
            Resource::SiteV1 => return Err(T::SiteV1),
            Resource::Healthz => vec![(Get, T::Healthz)],
            Resource::Livez => vec![(Get, T::Livez)],
            Resource::Readyz => vec![(Get, T::Readyz)],
            Resource::OpenApi => vec![(Get, T::OpenApi)],
            Resource::Version => vec![(Get, T::Version)],
            Resource::Metrics => vec![(Get, T::Metrics)],
            Resource::SiteEvents => vec![(Get, T::SiteEvents)],
            Resource::SignIn => vec![(Post, T::SignIn)],
            Resource::SignOut => vec![(Post, T::SignOut)],
            Resource::Session => vec![(Get, T::Session)],
            Resource::SiteAlerts => vec![(Get, T::ListSiteAlerts), (Post, T::CreateSiteAlert)],
            Resource::SiteAlert(id) => vec![(Delete, T::DeleteSiteAlert(id))],
            Resource::Keys => vec![(Get, T::ListKeys), (Post, T::AddKey)],
            Resource::Key(id) => vec![(Delete, T::RevokeKey(id))],
            Resource::Channels => vec![(Get, T::Channels), (Put, T::SetChannels)],
            Resource::Exchanges => vec![(Get, T::Exchanges)],
            Resource::ExchangeSymbols(ex) => vec![(Get, T::ExchangeSymbols(ex))],
            Resource::Symbol(s) => vec![(Get, T::Symbol(s))],
            Resource::Levels(None) => vec![(Get, T::LevelsBulk)],
            Resource::Levels(Some(s)) => vec![(Get, T::Levels(s))],
            Resource::Densities(None) => vec![(Get, T::DensitiesBulk)],
            Resource::Densities(Some(s)) => vec![(Get, T::Densities(s))],
            Resource::WallHistory(None) => vec![(Get, T::WallHistoryBulk)],
            Resource::WallHistory(Some(s)) => vec![(Get, T::WallHistory(s))],
            Resource::MetricsOf(None) => vec![(Get, T::MetricsBulk)],
            Resource::MetricsOf(Some(s)) => vec![(Get, T::MetricsOne(s))],
            Resource::Candles(s) => vec![(Get, T::Candles(s))],
            Resource::Book(s) => vec![(Get, T::Book(s))],
            Resource::Rankings(c) => vec![(Get, T::Rankings(c))],
            Resource::Market => vec![(Get, T::Market)],
            Resource::Perp(None) => vec![(Get, T::PerpBulk)],
            Resource::Perp(Some(s)) => vec![(Get, T::Perp(s))],
            Resource::PerpHistory(s) => vec![(Get, T::PerpHistory(s))],
            Resource::Liquidations(None) => vec![(Get, T::LiquidationsBulk)],
            Resource::Liquidations(Some(s)) => vec![(Get, T::Liquidations(s))],
            Resource::Alerts => vec![(Get, T::ListAlerts), (Post, T::CreateAlert)],
            Resource::Alert(id) => vec![(Patch, T::UpdateAlert(id)), (Delete, T::DeleteAlert(id))],
            Resource::Deliveries(id) => vec![(Get, T::DeliveryLog(id))],
            Resource::Redeliver(id, at) => vec![(Post, T::Redeliver(id, at))],
            Resource::TestAlert(id) => vec![(Post, T::TestAlert(id))],
            Resource::WebhookSecret => {
                vec![(Get, T::WebhookSigning), (Post, T::RotateWebhookSecret), (Delete, T::EndWebhookSecret)]
            }
            Resource::Inbox => vec![(Get, T::Inbox)],
            Resource::Latency => vec![(Get, T::Latency), (Delete, T::LatencyReset)],
        })
    }
}

impl<'a> Route<'a> {
    /// The route of `method` on `path`: 404 for a path no resource is at, 405 (with the
    /// resource's methods) for a method it does not take.
    pub fn parse(method: &Method, path: &'a str) -> Result<Route<'a>, NotRouted> {
        let resource = Resource::at(path).ok_or(NotRouted::NotFound)?;
        let methods = match resource.methods() {
            Ok(m) => m,
            Err(any_method) => return Ok(any_method),
        };
        let verb = Verb::of(method);
        if let Some((_, route)) = methods.iter().find(|(v, _)| Some(*v) == verb) {
            return Ok(*route);
        }
        let allow: Vec<&str> = methods.iter().map(|(v, _)| v.name()).collect();
        Err(NotRouted::MethodNotAllowed(allow.join(", ")))
    }
}

/// The template of the resource at `path` (`/v1/levels/{symbol}`), for labels; `None` for a path
/// no resource of the table is at.
pub fn template(path: &str) -> Option<&'static str> {
    Resource::at(path).map(Resource::template)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allow(method: Method, path: &str) -> String {
        match Route::parse(&method, path) {
            Err(NotRouted::MethodNotAllowed(a)) => a,
            other => panic!("{method} {path}: {other:?}"),
        }
    }

    #[test]
    fn every_route_of_the_api_is_parsed_with_its_segments() {
        let cases: &[(Method, &str, Route)] = &[
            (Method::GET, "/healthz", Route::Healthz),
            (Method::HEAD, "/version", Route::Version),
            (Method::GET, "/v1/exchanges/okx/symbols", Route::ExchangeSymbols("okx")),
            (Method::GET, "/v1/levels", Route::LevelsBulk),
            (Method::GET, "/v1/levels/BTCUSDT", Route::Levels("BTCUSDT")),
            (Method::GET, "/v1/metrics/ethusdt", Route::MetricsOne("ethusdt")),
            (Method::GET, "/v1/walls/history", Route::WallHistoryBulk),
            (Method::GET, "/v1/walls/btcusdt/history", Route::WallHistory("btcusdt")),
            (Method::GET, "/v1/perp", Route::PerpBulk),
            (Method::GET, "/v1/perp/btcusdt", Route::Perp("btcusdt")),
            (Method::GET, "/v1/perp/btcusdt/history", Route::PerpHistory("btcusdt")),
            (Method::HEAD, "/v1/liquidations", Route::LiquidationsBulk),
            (Method::GET, "/v1/liquidations/ETHUSDT", Route::Liquidations("ETHUSDT")),
            (Method::POST, "/v1/alerts", Route::CreateAlert),
            (Method::GET, "/v1/alerts", Route::ListAlerts),
            (Method::DELETE, "/v1/alerts/7", Route::DeleteAlert("7")),
            (Method::PATCH, "/v1/alerts/7", Route::UpdateAlert("7")),
            (Method::POST, "/v1/alerts/7/deliveries/99/redeliver", Route::Redeliver("7", "99")),
            (Method::DELETE, "/v1/webhook-secret", Route::EndWebhookSecret),
            (Method::DELETE, "/v1/debug/latency", Route::LatencyReset),
            (Method::PUT, "/v1/stream", Route::Stream),
            (Method::GET, "/site/v1/stream", Route::SiteStream),
            (Method::GET, "/site/events", Route::SiteEvents),
            (Method::DELETE, "/site/keys/3", Route::RevokeKey("3")),
            (Method::PUT, "/site/channels", Route::SetChannels),
            (Method::HEAD, "/site/session", Route::Session),
            (Method::PATCH, "/site/v1/alerts/3", Route::SiteV1),
        ];
        for (method, path, route) in cases {
            assert_eq!(Route::parse(method, path).as_ref(), Ok(route), "{method} {path}");
        }
    }

    #[test]
    fn a_405_names_what_the_resource_takes_and_a_404_is_nothing_there() {
        assert_eq!(allow(Method::PUT, "/v1/alerts"), "GET, POST");
        assert_eq!(allow(Method::POST, "/v1/alerts/7"), "PATCH, DELETE");
        assert_eq!(allow(Method::PUT, "/v1/webhook-secret"), "GET, POST, DELETE");
        assert_eq!(allow(Method::POST, "/v1/debug/latency"), "GET, DELETE");
        assert_eq!(allow(Method::GET, "/v1/alerts/7/deliveries/99/redeliver"), "POST");
        assert_eq!(allow(Method::POST, "/healthz"), "GET");
        assert_eq!(allow(Method::DELETE, "/v1/walls/BTCUSDT/history"), "GET");
        assert_eq!(allow(Method::POST, "/v1/perp/BTCUSDT"), "GET");
        assert_eq!(allow(Method::DELETE, "/v1/liquidations"), "GET");
        assert_eq!(allow(Method::DELETE, "/site/events"), "GET");
        assert_eq!(allow(Method::PATCH, "/site/keys/3"), "DELETE");
        assert_eq!(allow(Method::POST, "/site/channels"), "GET, PUT");
        assert_eq!(allow(Method::GET, "/site/signin"), "POST");
        assert_eq!(allow(Method::PUT, "/site/site-alerts"), "GET, POST");
        for path in [
            "/v1",
            "/v1/nothing",
            "/v1/levels/a/b",
            "/v1/alerts/7/x",
            "/nothing",
            "/v1/exchanges/x",
            "/v1/walls/BTCUSDT",
            "/v1/perp/BTCUSDT/x",
            "/v1/liquidations/BTCUSDT/x",
            "/site/nothing",
            "/site/keys/3/x",
        ] {
            assert_eq!(Route::parse(&Method::GET, path), Err(NotRouted::NotFound), "{path}");
        }
    }

    #[test]
    fn a_path_belongs_to_one_family() {
        assert_eq!(family("/healthz"), Family::Public);
        assert_eq!((family("/v1"), family("/v1/alerts")), (Family::Keyed, Family::Keyed));
        assert_eq!(family("/site/session"), Family::Site);
        assert_eq!(
            (family("/"), family("/assets/app.js"), family("/v1x")),
            (Family::Other, Family::Other, Family::Other)
        );
    }
}
