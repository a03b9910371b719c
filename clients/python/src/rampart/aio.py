"""The asynchronous client: every ``/v1`` endpoint of docs/api.md as a method."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal, cast

import httpx

from . import _core
from ._core import AUTO, Call, RateLimit, RetryPolicy, _Auto, call
from .errors import IncompatibleServerError, TransportError
from .models import (
    Alert,
    AlertPatch,
    Alerts,
    Book,
    Candles,
    Deleted,
    Deliveries,
    Delivery,
    Densities,
    DensitiesBulk,
    EndWebhookSecretResponse,
    Exchanges,
    GetWebhookSigningResponse,
    Health,
    Inbox,
    InboxItem,
    Latency,
    Levels,
    LevelsBulk,
    Liquidations,
    LiquidationsBulk,
    Market,
    Metrics,
    MetricsBulk,
    Perp,
    PerpBulk,
    PerpHistory,
    Ranking,
    RedeliverResponse,
    ResetLatencyResponse,
    RotateWebhookSecretResponse,
    Symbol,
    Symbols,
    TestAlertResponse,
    Version,
    WallHistory,
    WallHistoryBulk,
)

if TYPE_CHECKING:
    from .stream import Stream

from .client import (
    DELIVERY_LOG_MAX,
    INBOX_PAGE_MAX,
    AlertRequest,
    Interval,
    Outcome,
    Status,
    _core_env,
    _v,
)


class AsyncClient:
    """An asyncio client over one ``httpx.AsyncClient``; ``async with`` it or ``await close()``.

    ``url`` and ``key`` default to the ``RAMPART_URL`` and ``RAMPART_KEY`` environment
    variables; ``retry`` sets how 429s, 5xx and rate-limit headers are handled.
    """

    def __init__(
        self,
        url: str | None = None,
        key: str | None = None,
        *,
        retry: RetryPolicy | None = None,
        timeout_s: float = _core.DEFAULT_TIMEOUT_S,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.url, self.key = _core_env(url, key)
        self.retry = retry or RetryPolicy()
        self.rate_limit: RateLimit | None = None
        self._sleep = sleep
        self._http = httpx.AsyncClient(
            base_url=self.url,
            headers=_core.base_headers(self.key),
            timeout=timeout_s,
            transport=transport,
        )

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Closes the connection pool."""
        await self._http.aclose()

    # -- plumbing ---------------------------------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        json: Any = None,
        content: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        """Any request under the policy; answers the decoded JSON or raises a typed error."""
        c: Call[Any] = Call("raw", method.upper(), path, params or {}, json, headers or {})
        return await self._send(c, content)

    async def _send(self, c: Call[Any], content: bytes | None = None) -> Any:
        attempt, waited = 0, False
        while True:
            attempt += 1
            # A retry has just waited out Retry-After: the headers' reset is that same wait.
            wait = 0.0 if waited else self.retry.delay_before(self.rate_limit)
            if wait > 0:
                await self._sleep(wait)
            waited = True
            try:
                response = await self._http.request(
                    c.method,
                    c.path,
                    params=c.params,
                    json=c.body if content is None else None,
                    content=content,
                    headers=c.headers,
                )
            except httpx.TransportError as e:
                delay = self.retry.delay_after_transport_error(c, attempt)
                if delay is None:
                    raise TransportError(f"{c.method} {c.path}: {e}") from e
                await self._sleep(delay)
                continue
            self.rate_limit = RateLimit.from_headers(response.headers) or self.rate_limit
            if response.status_code < 400:
                return response.json()
            error = _core.error_from(response)
            delay = self.retry.delay_after_error(c, attempt, error)
            if delay is None:
                raise error
            await self._sleep(delay)

    # -- version ----------------------------------------------------------------------------

    async def version(self) -> Version:
        """``GET /version``: the server's version and revision."""
        return cast(Version, await self.request("GET", "/version"))

    async def health(self) -> Health:
        """``GET /healthz`` (200 only; a 503 raises ``ServerError``)."""
        return cast(Health, await self.request("GET", "/healthz"))

    async def check_version(self) -> str:
        """The server's version; raises ``IncompatibleServerError`` outside the version policy."""
        server = (await self.version())["version"]
        if not _core.supports(server):
            raise IncompatibleServerError(f"server {server} is not supported by client {_v()}")
        return server

    # -- levels and walls -------------------------------------------------------------------

    async def levels(self, symbol: str, *, exchange: str | None = None) -> Levels:
        """``GET /v1/levels/{symbol}``: the pair's zones, nearest first."""
        c: Call[Levels] = call("getLevels", {"symbol": symbol}, {"exchange": exchange})
        return cast(Levels, await self._send(c))

    async def levels_bulk(
        self, *, exchange: str | None = None, symbols: list[str] | None = None
    ) -> LevelsBulk:
        """``GET /v1/levels``: every pair of a venue (or ``symbols``, at most 100)."""
        params = {"exchange": exchange, "symbols": _core.symbols_param(symbols)}
        return cast(LevelsBulk, await self._send(call("getLevelsBulk", None, params)))

    async def densities(self, symbol: str, *, exchange: str | None = None) -> Densities:
        """``GET /v1/densities/{symbol}``: the pair's walls (404 when it has none)."""
        c = call("getDensities", {"symbol": symbol}, {"exchange": exchange})
        return cast(Densities, await self._send(c))

    async def densities_bulk(
        self, *, exchange: str | None = None, symbols: list[str] | None = None
    ) -> DensitiesBulk:
        """``GET /v1/densities``: every pair of a venue that has walls."""
        params = {"exchange": exchange, "symbols": _core.symbols_param(symbols)}
        return cast(DensitiesBulk, await self._send(call("getDensitiesBulk", None, params)))

    async def wall_history(
        self,
        symbol: str,
        *,
        exchange: str | None = None,
        side: Literal["bid", "ask"] | None = None,
        outcome: Outcome | None = None,
        limit: int | None = None,
    ) -> WallHistory:
        """``GET /v1/walls/{symbol}/history``: the pair's walls of the last 24 h."""
        params = {"exchange": exchange, "side": side, "outcome": outcome, "limit": limit}
        c = call("getWallHistory", {"symbol": symbol}, params)
        return cast(WallHistory, await self._send(c))

    async def wall_history_bulk(
        self,
        *,
        exchange: str | None = None,
        outcome: Outcome | None = None,
        min_usd: float | None = None,
        limit: int | None = None,
    ) -> WallHistoryBulk:
        """``GET /v1/walls/history``: the venue's walls of the last 24 h."""
        params = {"exchange": exchange, "outcome": outcome, "min_usd": min_usd, "limit": limit}
        return cast(WallHistoryBulk, await self._send(call("getWallHistoryBulk", None, params)))

    # -- derivatives (decisions §17) --------------------------------------------------------

    async def perp(self, symbol: str, *, exchange: str | None = None) -> Perp:
        """``GET /v1/perp/{symbol}``: the pair's USDT perpetual (404 when it has none)."""
        c = call("getPerp", {"symbol": symbol}, {"exchange": exchange})
        return cast(Perp, await self._send(c))

    async def perp_history(
        self, symbol: str, *, exchange: str | None = None, interval: str | None = None
    ) -> PerpHistory:
        """``GET /v1/perp/{symbol}/history``: one window (default ``1h``) in its 60 slots."""
        c = call("getPerpHistory", {"symbol": symbol}, {"exchange": exchange, "interval": interval})
        return cast(PerpHistory, await self._send(c))

    async def perp_bulk(
        self, *, exchange: str | None = None, symbols: list[str] | None = None
    ) -> PerpBulk:
        """``GET /v1/perp``: the venue's pairs with a perpetual (or ``symbols``, at most 100)."""
        params = {"exchange": exchange, "symbols": _core.symbols_param(symbols)}
        return cast(PerpBulk, await self._send(call("getPerpBulk", None, params)))

    async def liquidations(
        self,
        symbol: str,
        *,
        exchange: str | None = None,
        side: Literal["long", "short", "any"] | None = None,
        min_usd: float | None = None,
        limit: int | None = None,
    ) -> Liquidations:
        """``GET /v1/liquidations/{symbol}``: the pair's liquidations of the last 24 h."""
        params = {"exchange": exchange, "side": side, "min_usd": min_usd, "limit": limit}
        c = call("getLiquidations", {"symbol": symbol}, params)
        return cast(Liquidations, await self._send(c))

    async def liquidations_bulk(
        self,
        *,
        exchange: str | None = None,
        side: Literal["long", "short", "any"] | None = None,
        min_usd: float | None = None,
        limit: int | None = None,
    ) -> LiquidationsBulk:
        """``GET /v1/liquidations``: the venue's liquidations of the last 24 h."""
        params = {"exchange": exchange, "side": side, "min_usd": min_usd, "limit": limit}
        return cast(LiquidationsBulk, await self._send(call("getLiquidationsBulk", None, params)))

    # -- alerts -----------------------------------------------------------------------------

    async def list_alerts(self, *, status: Status | None = None) -> Alerts:
        """``GET /v1/alerts``: the account's alerts (``active`` by default)."""
        return cast(Alerts, await self._send(call("listAlerts", None, {"status": status})))

    async def create_alert(
        self, request: AlertRequest, *, idempotency_key: str | _Auto | None = AUTO
    ) -> Alert:
        """``POST /v1/alerts``; sends a fresh ``Idempotency-Key`` unless given one or ``None``.

        With a key the create is retried after a 5xx or a lost answer without the risk of a
        second alert (the server answers the first one).
        """
        headers = _core.idempotency_headers(idempotency_key)
        c = call("createAlert", None, None, dict(request), headers)
        return cast(Alert, (await self._send(c))["data"])

    async def update_alert(self, alert_id: int, patch: AlertPatch) -> Alert:
        """``PATCH /v1/alerts/{id}``: note, webhook, pause, expiry, cooldown, limits, text."""
        c = call("updateAlert", {"id": alert_id}, None, dict(patch))
        return cast(Alert, (await self._send(c))["data"])

    async def pause_alert(self, alert_id: int) -> Alert:
        """Pauses the alert (``PATCH {"paused": true}``)."""
        return await self.update_alert(alert_id, {"paused": True})

    async def resume_alert(self, alert_id: int) -> Alert:
        """Resumes the alert (``PATCH {"paused": false}``)."""
        return await self.update_alert(alert_id, {"paused": False})

    async def delete_alert(self, alert_id: int) -> Deleted:
        """``DELETE /v1/alerts/{id}``."""
        return cast(Deleted, await self._send(call("deleteAlert", {"id": alert_id})))

    async def test_alert(self, alert_id: int) -> TestAlertResponse:
        """``POST /v1/alerts/{id}/test``: sends the alert's webhook now (``alert.test``)."""
        return cast(TestAlertResponse, await self._send(call("testAlert", {"id": alert_id})))

    async def deliveries(self, alert_id: int, *, limit: int | None = None) -> Deliveries:
        """``GET /v1/alerts/{id}/deliveries``: webhook attempts, newest first."""
        c = call("alertDeliveries", {"id": alert_id}, {"limit": limit})
        return cast(Deliveries, await self._send(c))

    async def iter_deliveries(self, alert_id: int) -> AsyncIterator[Delivery]:
        """Every row of the alert's delivery log, newest first.

        The log takes no cursor: it keeps at most ``DELIVERY_LOG_MAX`` rows per alert, so one
        request of that size reads all of it.
        """
        for row in (await self.deliveries(alert_id, limit=DELIVERY_LOG_MAX))["data"]:
            yield row

    async def redeliver(self, alert_id: int, trigger_time: int) -> RedeliverResponse:
        """``POST /v1/alerts/{id}/deliveries/{triggerTime}/redeliver``."""
        args = {"id": alert_id, "triggerTime": trigger_time}
        return cast(RedeliverResponse, await self._send(call("redeliver", args)))

    # -- inbox ------------------------------------------------------------------------------

    async def inbox(self, *, limit: int | None = None, before: int | None = None) -> Inbox:
        """``GET /v1/inbox``: the newest entries (below ``before`` when given)."""
        return cast(
            Inbox, await self._send(call("getInbox", None, {"limit": limit, "before": before}))
        )

    async def iter_inbox(
        self, *, page: int = 100, before: int | None = None, max_items: int | None = None
    ) -> AsyncIterator[InboxItem]:
        """Every inbox entry, newest first, a page at a time (``page`` 1 to 1000).

        Stops after ``max_items`` entries when given, or at the oldest entry.
        """
        page = max(1, min(page, INBOX_PAGE_MAX))
        handed = 0
        while max_items is None or handed < max_items:
            items = (await self.inbox(limit=page, before=before))["data"]
            for item in items:
                if max_items is not None and handed >= max_items:
                    return
                handed += 1
                yield item
            if len(items) < page:
                return
            before = items[-1]["id"]

    # -- venues -----------------------------------------------------------------------------

    async def exchanges(self) -> Exchanges:
        """``GET /v1/exchanges``: the venues served."""
        return cast(Exchanges, await self._send(call("listExchanges")))

    async def symbols(self, exchange: str) -> Symbols:
        """``GET /v1/exchanges/{exchange}/symbols``: a venue's pairs and last prices."""
        return cast(Symbols, await self._send(call("listSymbols", {"exchange": exchange})))

    async def symbol(self, symbol: str, *, exchange: str | None = None) -> Symbol:
        """``GET /v1/symbols/{symbol}``: one pair."""
        c = call("getSymbol", {"symbol": symbol}, {"exchange": exchange})
        return cast(Symbol, await self._send(c))

    # -- metrics, rankings, board, candles, book ----------------------------------------------

    async def metrics(
        self,
        symbol: str,
        *,
        exchange: str | None = None,
        interval: Interval | None = None,
        metric: str | None = None,
        usd: bool | None = None,
    ) -> Metrics:
        """``GET /v1/metrics/{symbol}``."""
        params = {"exchange": exchange, "interval": interval, "metric": metric, "usd": usd}
        return cast(Metrics, await self._send(call("getMetrics", {"symbol": symbol}, params)))

    async def metrics_bulk(
        self,
        *,
        exchange: str | None = None,
        interval: Interval | None = None,
        metric: str | None = None,
        symbols: list[str] | None = None,
        usd: bool | None = None,
    ) -> MetricsBulk:
        """``GET /v1/metrics``: every pair of a venue."""
        params = {
            "exchange": exchange,
            "interval": interval,
            "metric": metric,
            "symbols": _core.symbols_param(symbols),
            "usd": usd,
        }
        return cast(MetricsBulk, await self._send(call("getMetricsBulk", None, params)))

    async def ranking(
        self,
        category: str,
        *,
        exchange: str | None = None,
        metric: str | None = None,
        interval: Interval | None = None,
        order: Literal["asc", "desc"] | None = None,
        limit: int | None = None,
    ) -> Ranking:
        """``GET /v1/rankings/{category}``."""
        params = {
            "exchange": exchange,
            "metric": metric,
            "interval": interval,
            "order": order,
            "limit": limit,
        }
        return cast(Ranking, await self._send(call("getRanking", {"category": category}, params)))

    async def market(
        self, *, exchange: str | None = None, interval: Interval | None = None
    ) -> Market:
        """``GET /v1/market``: the market board."""
        params = {"exchange": exchange, "interval": interval}
        return cast(Market, await self._send(call("getMarket", None, params)))

    async def candles(
        self,
        symbol: str,
        *,
        exchange: str | None = None,
        interval: Interval | None = None,
        limit: int | None = None,
    ) -> Candles:
        """``GET /v1/candles/{symbol}``."""
        params = {"exchange": exchange, "interval": interval, "limit": limit}
        return cast(Candles, await self._send(call("getCandles", {"symbol": symbol}, params)))

    async def book(
        self, symbol: str, *, exchange: str | None = None, limit: int | None = None
    ) -> Book:
        """``GET /v1/book/{symbol}``."""
        params = {"exchange": exchange, "limit": limit}
        return cast(Book, await self._send(call("getBook", {"symbol": symbol}, params)))

    # -- operator ---------------------------------------------------------------------------

    async def latency(self) -> Latency:
        """``GET /v1/debug/latency``."""
        return cast(Latency, await self._send(call("getLatency")))

    async def reset_latency(self) -> ResetLatencyResponse:
        """``DELETE /v1/debug/latency`` (an operator key)."""
        return cast(ResetLatencyResponse, await self._send(call("resetLatency")))

    # -- webhook signing --------------------------------------------------------------------

    async def webhook_signing(self) -> GetWebhookSigningResponse:
        """``GET /v1/webhook-secret``: whether webhooks are signed (never the secret)."""
        return cast(GetWebhookSigningResponse, await self._send(call("getWebhookSigning")))

    async def rotate_webhook_secret(self) -> RotateWebhookSecretResponse:
        """``POST /v1/webhook-secret``: a new secret, shown once; the old one signs 24 h more."""
        return cast(RotateWebhookSecretResponse, await self._send(call("rotateWebhookSecret")))

    async def end_webhook_signing(self) -> EndWebhookSecretResponse:
        """``DELETE /v1/webhook-secret``: webhooks are no longer signed."""
        return cast(EndWebhookSecretResponse, await self._send(call("endWebhookSecret")))

    # -- streams ----------------------------------------------------------------------------

    def stream(
        self,
        channels: list[str],
        *,
        since: int | None = None,
        min_usd: float | None = None,
        transport: Literal["websocket", "sse", "auto"] = "auto",
    ) -> Stream:
        """``GET /v1/stream``: an async iterator ."""
        from .stream import Stream

        return Stream(
            self.url,
            self.key,
            channels,
            since=since,
            min_usd=min_usd,
            transport=transport,
        )
