"""What the sync and async clients share: the operations table, calls, the retry policy."""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx

from ._version import __version__
from .errors import ApiError, error_for

T = TypeVar("T")

#: Every ``/v1`` operation of ``docs/openapi.json``: operationId -> (HTTP method, path template).
#: ``tests/test_contract.py`` checks this table against the schema, both ways.
OPERATIONS: dict[str, tuple[str, str]] = {
    "getLevels": ("GET", "/v1/levels/{symbol}"),
    "getLevelsBulk": ("GET", "/v1/levels"),
    "getDensities": ("GET", "/v1/densities/{symbol}"),
    "getDensitiesBulk": ("GET", "/v1/densities"),
    "getWallHistory": ("GET", "/v1/walls/{symbol}/history"),
    "getWallHistoryBulk": ("GET", "/v1/walls/history"),
    "getPerp": ("GET", "/v1/perp/{symbol}"),
    "getPerpHistory": ("GET", "/v1/perp/{symbol}/history"),
    "getPerpBulk": ("GET", "/v1/perp"),
    "getLiquidations": ("GET", "/v1/liquidations/{symbol}"),
    "getLiquidationsBulk": ("GET", "/v1/liquidations"),
    "listAlerts": ("GET", "/v1/alerts"),
    "createAlert": ("POST", "/v1/alerts"),
    "updateAlert": ("PATCH", "/v1/alerts/{id}"),
    "deleteAlert": ("DELETE", "/v1/alerts/{id}"),
    "getInbox": ("GET", "/v1/inbox"),
    "listExchanges": ("GET", "/v1/exchanges"),
    "listSymbols": ("GET", "/v1/exchanges/{exchange}/symbols"),
    "getSymbol": ("GET", "/v1/symbols/{symbol}"),
    "getLatency": ("GET", "/v1/debug/latency"),
    "resetLatency": ("DELETE", "/v1/debug/latency"),
    "getMetrics": ("GET", "/v1/metrics/{symbol}"),
    "getMetricsBulk": ("GET", "/v1/metrics"),
    "getRanking": ("GET", "/v1/rankings/{category}"),
    "getMarket": ("GET", "/v1/market"),
    "getCandles": ("GET", "/v1/candles/{symbol}"),
    "getBook": ("GET", "/v1/book/{symbol}"),
    "getWebhookSigning": ("GET", "/v1/webhook-secret"),
    "rotateWebhookSecret": ("POST", "/v1/webhook-secret"),
    "endWebhookSecret": ("DELETE", "/v1/webhook-secret"),
    "alertDeliveries": ("GET", "/v1/alerts/{id}/deliveries"),
    "redeliver": ("POST", "/v1/alerts/{id}/deliveries/{triggerTime}/redeliver"),
    "testAlert": ("POST", "/v1/alerts/{id}/test"),
    "openStream": ("GET", "/v1/stream"),
}

#: operationId -> the client method that calls it (the same name on ``Client`` and ``AsyncClient``).
METHODS: dict[str, str] = {
    "getLevels": "levels",
    "getLevelsBulk": "levels_bulk",
    "getDensities": "densities",
    "getDensitiesBulk": "densities_bulk",
    "getWallHistory": "wall_history",
    "getWallHistoryBulk": "wall_history_bulk",
    "getPerp": "perp",
    "getPerpHistory": "perp_history",
    "getPerpBulk": "perp_bulk",
    "getLiquidations": "liquidations",
    "getLiquidationsBulk": "liquidations_bulk",
    "listAlerts": "list_alerts",
    "createAlert": "create_alert",
    "updateAlert": "update_alert",
    "deleteAlert": "delete_alert",
    "getInbox": "inbox",
    "listExchanges": "exchanges",
    "listSymbols": "symbols",
    "getSymbol": "symbol",
    "getLatency": "latency",
    "resetLatency": "reset_latency",
    "getMetrics": "metrics",
    "getMetricsBulk": "metrics_bulk",
    "getRanking": "ranking",
    "getMarket": "market",
    "getCandles": "candles",
    "getBook": "book",
    "getWebhookSigning": "webhook_signing",
    "rotateWebhookSecret": "rotate_webhook_secret",
    "endWebhookSecret": "end_webhook_signing",
    "alertDeliveries": "deliveries",
    "redeliver": "redeliver",
    "testAlert": "test_alert",
    "openStream": "stream",
}

#: Operations that may be sent again after a 5xx or a lost answer without a second effect.
_REPEATABLE = {"updateAlert", "endWebhookSecret", "resetLatency"}

DEFAULT_URL = "http://127.0.0.1:8080"
DEFAULT_TIMEOUT_S = 15.0
USER_AGENT = f"rampart-client-python/{__version__}"


class _Auto:
    """The default of ``idempotency_key``: a fresh UUID per call."""

    def __repr__(self) -> str:
        return "AUTO"


AUTO = _Auto()


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request: its operation, method, path and what it sends; ``T`` is its answer."""

    op: str
    method: str
    path: str
    params: dict[str, str] = field(default_factory=dict)
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def repeatable(self) -> bool:
        """Whether a retry after a 5xx or a lost answer cannot make a second effect."""
        return self.method == "GET" or self.op in _REPEATABLE or "Idempotency-Key" in self.headers


def call(
    op: str,
    path_args: Mapping[str, str | int] | None = None,
    params: Mapping[str, str | int | float | bool | None] | None = None,
    body: Any = None,
    headers: Mapping[str, str] | None = None,
) -> Call[Any]:
    """A ``Call`` of operation ``op``; ``None`` query values are left out."""
    method, template = OPERATIONS[op]
    path = template
    for name, value in (path_args or {}).items():
        path = path.replace("{" + name + "}", quote(str(value), safe=""))
    query = {k: _param(v) for k, v in (params or {}).items() if v is not None}
    return Call(op, method, path, query, body, dict(headers or {}))


def _param(value: str | int | float | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def idempotency_headers(key: str | _Auto | None) -> dict[str, str]:
    """The ``Idempotency-Key`` header: a fresh UUID by default, none when ``key`` is ``None``."""
    if key is None:
        return {}
    return {"Idempotency-Key": str(uuid.uuid4()) if isinstance(key, _Auto) else key}


def symbols_param(symbols: list[str] | None) -> str | None:
    """``symbols=A,B,C`` (at most 100, the server's bound) or ``None``."""
    return ",".join(symbols) if symbols else None


@dataclass(frozen=True)
class RateLimit:
    """The last ``X-RateLimit-*`` headers the server sent."""

    limit: int
    remaining: int
    reset_s: float

    @staticmethod
    def from_headers(headers: Mapping[str, str]) -> RateLimit | None:
        """The headers' values, or ``None`` when the answer carries none."""
        try:
            return RateLimit(
                int(headers["x-ratelimit-limit"]),
                int(headers["x-ratelimit-remaining"]),
                float(headers["x-ratelimit-reset"]),
            )
        except (KeyError, ValueError):
            return None


@dataclass(frozen=True)
class RetryPolicy:
    """How a client waits and retries; the caller sets it per client.

    - 429 (and 503 ``starting``): wait exactly ``Retry-After`` then retry, unless it is over
      ``max_retry_after_s`` (then the ``RateLimitError`` is raised at once).
    - 5xx and lost answers: exponential backoff with jitter (``backoff_initial_s`` doubling,
      at most ``backoff_max_s``), only for repeatable calls: GETs, PATCH, and creates that carry
      an ``Idempotency-Key`` (api.md §7 rule 5).
    - ``wait_when_exhausted``: when the last answer said ``X-RateLimit-Remaining: 0``, wait
      ``X-RateLimit-Reset`` seconds before the next request instead of drawing a 429.
    - ``max_attempts`` bounds the attempts of one call (1: never retry).
    """

    max_attempts: int = 4
    max_retry_after_s: float = 60.0
    backoff_initial_s: float = 1.0
    backoff_max_s: float = 30.0
    jitter: float = 0.25
    wait_when_exhausted: bool = True

    def delay_after_error(self, c: Call[Any], attempt: int, error: ApiError) -> float | None:
        """Seconds to wait before attempt ``attempt + 1``, or ``None`` to raise ``error``."""
        if attempt >= self.max_attempts:
            return None
        retry_after = error.headers.get("retry-after")
        if error.status == 429 or (error.status == 503 and retry_after is not None):
            wait = float(retry_after) if retry_after and _is_number(retry_after) else 1.0
            return wait if wait <= self.max_retry_after_s else None
        if error.status >= 500 and c.repeatable:
            return self.backoff(attempt)
        return None

    def delay_after_transport_error(self, c: Call[Any], attempt: int) -> float | None:
        """Seconds to wait after a lost answer, or ``None`` to raise."""
        if attempt >= self.max_attempts or not c.repeatable:
            return None
        return self.backoff(attempt)

    def delay_before(self, last: RateLimit | None) -> float:
        """Seconds to wait before a request, given the last rate-limit headers."""
        if not self.wait_when_exhausted or last is None or last.remaining > 0:
            return 0.0
        return min(last.reset_s, self.max_retry_after_s)

    def backoff(self, attempt: int) -> float:
        """The wait after failed attempt ``attempt`` (1-based), jittered."""
        base = min(self.backoff_max_s, self.backoff_initial_s * (2.0 ** (attempt - 1)))
        return base * (1 - self.jitter * random.random())


NO_RETRY = RetryPolicy(max_attempts=1, wait_when_exhausted=False)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def error_from(response: httpx.Response) -> ApiError:
    """The typed exception of an answer of 400 or more."""
    message = response.reason_phrase or f"HTTP {response.status_code}"
    try:
        payload = response.json()
        if isinstance(payload, dict) and isinstance(payload.get("error"), str):
            message = payload["error"]
    except (json.JSONDecodeError, UnicodeDecodeError):
        pass
    return error_for(response.status_code, message, response.headers)


def base_headers(key: str | None) -> dict[str, str]:
    """The headers of every request."""
    headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return headers


def supports(server_version: str, client_version: str = __version__) -> bool:
    """The version policy: the server's ``major.minor`` equals the client's."""
    return server_version.split(".")[:2] == client_version.split(".")[:2]
