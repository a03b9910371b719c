"""``GET /v1/stream``: an async iterator over pushed market data and the account's alerts.

The stream subscribes to its channels, applies every snapshot and update to ``state`` (prices,
levels, walls, board per channel and pair) and hands each channel message out. When the
connection drops it reconnects with backoff, subscribes again, and resumes ``alerts`` after the
last inbox id it handed out: no entry is skipped and none is handed out twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, cast

import httpx
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from . import _core
from .errors import (
    ApiError,
    RampartError,
    RateLimitError,
    StreamClosedError,
    StreamError,
    TransportError,
    error_for,
)
from .models import Level, StreamMessageEvent, Wall

__all__ = ["CHANNEL_KINDS", "Backoff", "Stream", "StreamState", "channel_name"]

#: The channel kinds of decisions.md §12 and §17 (``alerts`` takes no venue).
CHANNEL_KINDS = ("price", "levels", "walls", "board", "alerts", "liquidations", "perp")
#: Liquidations :class:`StreamState` keeps per pair (as the server does).
LIQUIDATIONS_KEPT = 128
#: Close codes after which reconnecting cannot help: key revoked, too many bad ops.
_FATAL_CLOSES = {4401: "API key revoked", 1008: "policy violation"}
#: Statuses of a refused upgrade that mean "no WebSocket here": fall back to server-sent events.
_NO_WEBSOCKET = {400, 405, 426, 501, 502}
_SUBSCRIBE_ID = 1


def channel_name(kind: str, exchange: str | None = None, symbol: str | None = None) -> str:
    """``price:binance:BTCUSDT``, ``walls:okx:*``, ``board:bybit`` or ``alerts``."""
    if kind not in CHANNEL_KINDS:
        raise ValueError(f"unknown channel kind {kind!r}; allowed: {', '.join(CHANNEL_KINDS)}")
    parts = [kind] + [p for p in (exchange, symbol) if p is not None]
    return ":".join(parts)


@dataclass
class StreamState:
    """What the stream's messages have built so far, per venue and pair."""

    prices: dict[tuple[str, str], float | None] = field(default_factory=dict)
    levels: dict[tuple[str, str], list[Level]] = field(default_factory=dict)
    walls: dict[tuple[str, str], dict[tuple[str, float], Wall]] = field(default_factory=dict)
    board: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Newest first, at most :data:`LIQUIDATIONS_KEPT` per pair.
    liquidations: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    perp: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)

    def apply(self, message: StreamMessageEvent) -> None:
        """Applies one channel message (a snapshot replaces, an update changes)."""
        parts = message["channel"].split(":")
        kind, exchange = parts[0], parts[1].lower() if len(parts) > 1 else ""
        data, kind_type = message["data"], message["type"]
        pair = (exchange, str(data.get("symbol") or (parts[2] if len(parts) > 2 else "")).upper())
        if kind == "price":
            self.prices[pair] = data.get("price")
        elif kind == "levels":
            self._apply_levels(pair, kind_type, data)
        elif kind == "walls":
            self._apply_walls(pair, kind_type, data)
        elif kind == "board":
            self.board[exchange] = data
        elif kind == "liquidations":
            self._apply_liquidations(exchange, pair, kind_type, data)
        elif kind == "perp":
            self.perp[pair] = data

    def _apply_liquidations(
        self, exchange: str, pair: tuple[str, str], kind: str, data: dict[str, Any]
    ) -> None:
        if kind == "snapshot":
            if data.get("symbol") != "*":
                self.liquidations[pair] = list(data.get("liquidations", []))
                return
            # A venue's snapshot: each entry names its pair.
            for key in [k for k in self.liquidations if k[0] == exchange]:
                del self.liquidations[key]
            for entry in data.get("liquidations", []):
                one = {k: v for k, v in entry.items() if k != "symbol"}
                self.liquidations.setdefault((exchange, str(entry["symbol"])), []).append(one)
        elif kind == "liquidation":
            held = self.liquidations.setdefault(pair, [])
            held.insert(0, data["liquidation"])
            del held[LIQUIDATIONS_KEPT:]

    def _apply_levels(self, pair: tuple[str, str], kind: str, data: dict[str, Any]) -> None:
        if kind == "snapshot":
            self.levels[pair] = list(data.get("levels", []))
        elif kind == "level.broken":
            gone = data["level"]
            self.levels[pair] = [lv for lv in self.levels.get(pair, []) if not _same(lv, gone)]
            self.prices[pair] = data.get("price")

    def _apply_walls(self, pair: tuple[str, str], kind: str, data: dict[str, Any]) -> None:
        if kind == "snapshot":
            walls = data.get("snapshot", {}).get("walls", [])
            self.walls[pair] = {(w["side"], w["price"]): w for w in walls}
            return
        wall = data["wall"]
        book = self.walls.setdefault(pair, {})
        if kind == "wall.gone":
            book.pop((wall["side"], wall["price"]), None)
        else:
            book[(wall["side"], wall["price"])] = wall


def _same(a: Level, b: dict[str, Any]) -> bool:
    return (a["price"], a["side"], a["timeframe"]) == (b["price"], b["side"], b["timeframe"])


@dataclass(frozen=True)
class Backoff:
    """Reconnect waits: ``initial_s`` doubling to ``max_s``, jittered; ``max_failures``
    connection attempts in a row at most before ``TransportError``."""

    initial_s: float = 0.1
    max_s: float = 5.0
    max_failures: int = 20

    def delay(self, failures: int) -> float:
        """The wait before attempt ``failures + 1`` (``failures`` 0: none)."""
        if failures == 0:
            return 0.0
        return min(self.max_s, self.initial_s * 2.0 ** (failures - 1)) * (0.5 + random.random() / 2)


class _Conn(Protocol):
    async def recv(self) -> dict[str, Any]: ...
    async def send(self, op: dict[str, Any]) -> None: ...
    async def close(self) -> None: ...


class _Dropped(Exception):
    """The connection ended; ``code`` is its close code (1006 when none came)."""

    def __init__(self, code: int, reason: str = "") -> None:
        super().__init__(f"{code} {reason}")
        self.code, self.reason = code, reason


class _WsConn:
    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws

    async def recv(self) -> dict[str, Any]:
        try:
            raw = await self.ws.recv()
        except ConnectionClosed as e:
            close = e.rcvd
            raise _Dropped(close.code if close else 1006, close.reason if close else "") from e
        return cast(dict[str, Any], json.loads(raw))

    async def send(self, op: dict[str, Any]) -> None:
        try:
            await self.ws.send(json.dumps(op))
        except ConnectionClosed as e:
            raise _Dropped(1006) from e

    async def close(self) -> None:
        await self.ws.close()


class _SseConn:
    def __init__(self, http: httpx.AsyncClient, response: httpx.Response) -> None:
        self.http, self.response = http, response
        self.lines: AsyncIterator[str] = response.aiter_lines()

    async def recv(self) -> dict[str, Any]:
        data: list[str] = []
        try:
            async for line in self.lines:
                if line.startswith("data:"):
                    data.append(line[5:].lstrip())
                elif not line and data:
                    message = cast(dict[str, Any], json.loads("\n".join(data)))
                    if message.get("type") == "close":
                        raise _Dropped(int(message["code"]), str(message.get("reason", "")))
                    return message
        except httpx.HTTPError as e:
            raise _Dropped(1006) from e
        raise _Dropped(1006, "event stream ended")

    async def send(self, op: dict[str, Any]) -> None:
        raise _Dropped(1000, "server-sent events take channels at connect")

    async def close(self) -> None:
        await self.response.aclose()
        await self.http.aclose()


class Stream:
    """``async with client.stream([...]) as s: async for message in s: ...``

    Each item is a channel message ``{"channel","type","seq","ts","data"}`` (``id`` too on
    ``alerts``); acks and heartbeats are consumed. ``state`` holds the channels' current state,
    ``last_alert_id`` the last ``alerts`` id handed out, ``reconnects`` how often it resumed.
    ``idle_timeout_s`` bounds the silence (the server sends a heartbeat every second) after
    which the connection is taken for dead and replaced.
    """

    def __init__(
        self,
        url: str,
        key: str | None,
        channels: list[str],
        *,
        since: int | None = None,
        min_usd: float | None = None,
        transport: Literal["websocket", "sse", "auto"] = "auto",
        backoff: Backoff | None = None,
        idle_timeout_s: float = 10.0,
    ) -> None:
        if not channels:
            raise ValueError("a stream needs at least one channel")
        self.url, self.key = url.rstrip("/"), key
        self.channels = list(dict.fromkeys(channels))
        self.min_usd = min_usd
        self.transport = transport
        self.backoff = backoff or Backoff()
        self.idle_timeout_s = idle_timeout_s
        self.state = StreamState()
        self.last_alert_id: int | None = since
        self.reconnects = 0
        self.connected_with: Literal["websocket", "sse"] | None = None
        self._conn: _Conn | None = None
        self._closed = False
        self._op_id = _SUBSCRIBE_ID
        self._failures = 0

    async def __aenter__(self) -> Stream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __aiter__(self) -> Stream:
        return self

    async def __anext__(self) -> StreamMessageEvent:
        while True:
            if self._closed:
                raise StopAsyncIteration
            if self._conn is None:
                await self._connect_with_backoff()
            conn = cast(_Conn, self._conn)
            try:
                raw = await asyncio.wait_for(conn.recv(), self.idle_timeout_s)
            except (_Dropped, asyncio.TimeoutError, OSError) as e:
                await self._lost(e)
                continue
            event = self._handle(raw)
            if event is not None:
                return event

    async def connect(self) -> None:
        """Connects and subscribes now (iteration otherwise does it at the first message).

        Once this returns, every ``alerts`` entry from now on will be handed out.
        """
        if self._conn is None and not self._closed:
            await self._connect_with_backoff()

    async def close(self) -> None:
        """Ends the stream; iteration stops."""
        self._closed = True
        await self._drop()

    async def subscribe(self, channels: list[str]) -> None:
        """Adds channels (kept across reconnects)."""
        self.channels.extend(c for c in channels if c not in self.channels)
        await self._op("subscribe", channels)

    async def unsubscribe(self, channels: list[str]) -> None:
        """Removes channels."""
        self.channels = [c for c in self.channels if c not in channels]
        await self._op("unsubscribe", channels)

    async def _op(self, op: str, channels: list[str]) -> None:
        if self._conn is None:
            return
        self._op_id += 1
        try:
            await self._conn.send({"op": op, "id": self._op_id, "channels": channels})
        except _Dropped:
            await self._drop()

    # -- connecting -------------------------------------------------------------------------

    async def _connect_with_backoff(self) -> None:
        while True:
            await asyncio.sleep(self.backoff.delay(self._failures))
            try:
                await self._connect()
                return
            except RateLimitError as e:
                if self.connected_with is None:
                    raise
                # The server may still count the dropped connection: its Retry-After says when.
                await asyncio.sleep(min(e.retry_after, self.backoff.max_s))
            except (
                OSError,
                asyncio.TimeoutError,
                InvalidHandshake,
                _Dropped,
                httpx.HTTPError,
            ) as e:
                if self.connected_with is None and not isinstance(
                    e, (OSError, asyncio.TimeoutError)
                ):
                    raise TransportError(f"stream: {e}") from e
            self._failures += 1
            if self._failures >= self.backoff.max_failures:
                raise TransportError(f"stream: no connection after {self._failures} attempts")

    async def _connect(self) -> None:
        if "alerts" in self.channels and self.last_alert_id is None:
            self.last_alert_id = await self._newest_inbox_id()
        if self.transport != "sse":
            try:
                self._conn = await self._open_ws()
                self.connected_with = "websocket"
                return
            except InvalidStatus as e:
                status = e.response.status_code
                if self.transport == "websocket" or status not in _NO_WEBSOCKET:
                    raise _refusal(status, bytes(e.response.body), dict(e.response.headers)) from e
        self._conn = await self._open_sse()
        self.connected_with = "sse"

    async def _open_ws(self) -> _WsConn:
        ws_url = "ws" + self.url[4:] if self.url.startswith("http") else self.url
        ws = await connect(
            ws_url + "/v1/stream",
            additional_headers=_core.base_headers(self.key),
            open_timeout=self.idle_timeout_s,
            max_size=16 * 1024 * 1024,
        )
        conn = _WsConn(ws)
        op: dict[str, Any] = {"op": "subscribe", "id": _SUBSCRIBE_ID, "channels": self.channels}
        if "alerts" in self.channels and self.last_alert_id is not None:
            op["since"] = self.last_alert_id
        if self.min_usd is not None:
            op["minUsd"] = self.min_usd
        await conn.send(op)
        answer = await asyncio.wait_for(conn.recv(), self.idle_timeout_s)
        if answer.get("type") == "error":
            await conn.close()
            raise StreamError(str(answer.get("error")))
        return conn

    async def _open_sse(self) -> _SseConn:
        params: dict[str, str] = {"channels": ",".join(self.channels)}
        if "alerts" in self.channels and self.last_alert_id is not None:
            params["since"] = str(self.last_alert_id)
        if self.min_usd is not None:
            params["minUsd"] = str(self.min_usd)
        headers = _core.base_headers(self.key) | {"Accept": "text/event-stream"}
        timeout = httpx.Timeout(self.idle_timeout_s)
        http = httpx.AsyncClient(base_url=self.url, headers=headers, timeout=timeout)
        request = http.build_request("GET", "/v1/stream", params=params)
        response = await http.send(request, stream=True)
        if response.status_code != 200:
            body = await response.aread()
            await response.aclose()
            await http.aclose()
            raise _refusal(response.status_code, body, dict(response.headers))
        return _SseConn(http, response)

    async def _newest_inbox_id(self) -> int:
        """The account's newest inbox id (0 when empty): where a first ``alerts`` starts."""
        headers = _core.base_headers(self.key)
        async with httpx.AsyncClient(base_url=self.url, headers=headers, timeout=10.0) as http:
            response = await http.get("/v1/inbox", params={"limit": "1"})
        if response.status_code != 200:
            raise _core.error_from(response)
        items = response.json()["data"]
        return int(items[0]["id"]) if items else 0

    async def _lost(self, error: BaseException) -> None:
        if isinstance(error, _Dropped) and error.code in _FATAL_CLOSES:
            await self.close()
            raise StreamClosedError(error.code, error.reason or _FATAL_CLOSES[error.code])
        await self._drop()
        self.reconnects += 1

    async def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()

    # -- messages ---------------------------------------------------------------------------

    def _handle(self, message: dict[str, Any]) -> StreamMessageEvent | None:
        kind = message.get("type")
        if kind in ("ack", "heartbeat"):
            return None
        if kind == "error":
            raise StreamError(str(message.get("error")))
        if "channel" not in message:
            return None
        self._failures = 0
        event = cast(StreamMessageEvent, message)
        if event["channel"] == "alerts" and "id" in event:
            if self.last_alert_id is not None and event["id"] <= self.last_alert_id:
                return None
            self.last_alert_id = event["id"]
        self.state.apply(event)
        return event


def _refusal(status: int, body: bytes, headers: dict[str, str]) -> RampartError:
    try:
        message = str(json.loads(body)["error"])
    except (ValueError, KeyError, TypeError):
        message = body.decode("utf-8", "replace") or f"HTTP {status}"
    error: ApiError = error_for(status, message, headers)
    return error
