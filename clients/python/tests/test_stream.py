"""Streams against the server: per-channel state, both transports, and alerts resumed across
connections killed mid-storm, with no entry skipped or repeated."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from conftest import WAIT_S, Rampart, price_of

from rampart import AsyncClient, Backoff, Client, Stream, StreamState
from rampart.models import StreamMessageEvent


async def until(stream: Stream, done: Any, timeout_s: float = WAIT_S) -> list[StreamMessageEvent]:
    """The stream's messages until ``done(message)`` is true (fails after the bound)."""
    seen: list[StreamMessageEvent] = []

    async def read() -> None:
        async for m in stream:
            seen.append(m)
            if done(m):
                return

    await asyncio.wait_for(read(), timeout_s)
    return seen


async def test_levels_walls_board_and_price_state(server: Rampart, key: str) -> None:
    async with AsyncClient(server.url, key) as c:
        channels = [
            "levels:binance:SOLUSDT",
            "walls:binance:SOLUSDT",
            "board:binance",
            "price:binance:SOLUSDT",
        ]
        async with c.stream(channels) as s:
            await until(s, lambda m: m["channel"] == "levels:binance:SOLUSDT")
            levels = s.state.levels[("binance", "SOLUSDT")]
            assert levels == (await c.levels("SOLUSDT"))["data"]
            above = min(
                (lv for lv in levels if lv["type"] == "resistance"), key=lambda lv: lv["price"]
            )
            server.trade("SOLUSDT", above["price"] * 1.001)
            broken = await until(s, lambda m: m["type"] == "level.broken")
            assert broken[-1]["data"]["level"]["price"] == above["price"]
            assert above not in s.state.levels[("binance", "SOLUSDT")]
            truth = server.true_book("SOLUSDT")
            qty = float(truth["bids"][3][1]) * 300
            placed = server.sim(
                "level",
                {
                    "venue": "binance",
                    "symbol": "SOLUSDT",
                    "side": "bid",
                    "depth": 5,
                    "qty": f"{qty:.0f}",
                },
            )
            price = float(placed["price"])
            await until(
                s, lambda m: m["type"] == "wall.appeared" and m["data"]["wall"]["price"] == price
            )
            assert ("bid", price) in s.state.walls[("binance", "SOLUSDT")]
            server.sim(
                "level",
                {
                    "venue": "binance",
                    "symbol": "SOLUSDT",
                    "side": "bid",
                    "price": placed["price"],
                    "qty": "0",
                },
            )
            await until(
                s, lambda m: m["type"] == "wall.gone" and m["data"]["wall"]["price"] == price
            )
            assert ("bid", price) not in s.state.walls[("binance", "SOLUSDT")]
            await until(s, lambda m: m["channel"] == "board:binance")
            assert set(s.state.board["binance"]["intervals"]) >= {"5m", "1h"}
            assert s.state.prices[("binance", "SOLUSDT")] is not None
            assert s.connected_with == "websocket"


async def test_server_sent_events_transport(server: Rampart, key: str) -> None:
    with Client(server.url, key) as c:
        async with c.stream(["price:binance:ETHUSDT"], transport="sse") as s:
            first = await until(s, lambda m: True)
            assert (first[0]["type"], first[0]["seq"]) == ("snapshot", 1)
            assert s.connected_with == "sse"


class Proxy:
    """A loopback TCP proxy to the server whose connections the test can cut at any moment."""

    def __init__(self, port: int, refuse_upgrades: bool = False) -> None:
        self.port, self.refuse_upgrades = port, refuse_upgrades
        self.writers: list[asyncio.StreamWriter] = []
        self.server: asyncio.Server | None = None

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.read(65536)
        if self.refuse_upgrades and b"upgrade: websocket" in head.lower():
            # A middlebox that does not pass WebSockets on.
            writer.write(b"HTTP/1.1 426 Upgrade Required\r\ncontent-length: 0\r\n\r\n")
            await writer.drain()
            writer.close()
            return
        up_r, up_w = await asyncio.open_connection("127.0.0.1", self.port)
        up_w.write(head)
        self.writers += [writer, up_w]

        async def pipe(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            with contextlib.suppress(Exception):
                while data := await r.read(65536):
                    w.write(data)
                    await w.drain()
            w.close()

        await asyncio.gather(pipe(reader, up_w), pipe(up_r, writer))

    def cut(self) -> None:
        """Kills every open connection at once (no close frame: a dropped network)."""
        for w in self.writers:
            w.transport.abort()
        self.writers.clear()

    async def close(self) -> None:
        self.cut()
        if self.server is not None:
            self.server.close()


async def test_subscribe_and_unsubscribe_on_an_open_stream(server: Rampart, key: str) -> None:
    for transport in ("websocket", "sse"):
        async with (
            AsyncClient(server.url, key) as c,
            c.stream(["board:binance"], transport=transport) as s,
        ):
            await until(s, lambda m: m["channel"] == "board:binance")
            await s.subscribe(["price:binance:ETHUSDT"])
            await until(s, lambda m: m["channel"] == "price:binance:ETHUSDT")
            await s.unsubscribe(["board:binance"])
            assert s.channels == ["price:binance:ETHUSDT"]
            assert s.reconnects == 0


async def test_auto_falls_back_to_server_sent_events(server: Rampart, key: str) -> None:
    proxy = Proxy(int(server.url.rsplit(":", 1)[1]), refuse_upgrades=True)
    url = await proxy.start()
    async with Stream(url, key, ["price:binance:BTCUSDT"]) as s:
        first = await until(s, lambda m: True)
        assert first[0]["channel"] == "price:binance:BTCUSDT"
        assert s.connected_with == "sse"
    await proxy.close()


def test_state_applies_snapshots_and_updates() -> None:
    state = StreamState()
    level = {
        "price": 10.0,
        "type": "resistance",
        "side": "high",
        "timeframe": "1h",
        "time": 1,
        "strength": 1,
    }
    other = level | {"price": 12.0}
    wall = {
        "side": "bid",
        "price": 9.0,
        "qty": 1.0,
        "usd": 9.0,
        "dist": -1.0,
        "ratio": 20.0,
        "age": 3,
    }

    def msg(channel: str, kind: str, data: dict[str, Any]) -> StreamMessageEvent:
        return {"channel": channel, "type": kind, "seq": 1, "ts": 0, "data": data}  # type: ignore[typeddict-item]

    state.apply(
        msg("levels:binance:*", "snapshot", {"symbol": "BTCUSDT", "levels": [level, other]})
    )
    broken = level | {"type": "support"}  # its type read after the trade; the same level
    state.apply(
        msg(
            "levels:binance:*",
            "level.broken",
            {"symbol": "BTCUSDT", "level": broken, "price": 10.5, "ts": 2},
        )
    )
    assert state.levels[("binance", "BTCUSDT")] == [other]
    assert state.prices[("binance", "BTCUSDT")] == 10.5
    state.apply(
        msg(
            "walls:okx:ETHUSDT",
            "snapshot",
            {"symbol": "ETHUSDT", "snapshot": {"price": 10, "ts": 1, "walls": [wall]}},
        )
    )
    state.apply(
        msg("walls:okx:ETHUSDT", "wall.changed", {"symbol": "ETHUSDT", "wall": wall | {"qty": 2.0}})
    )
    assert state.walls[("okx", "ETHUSDT")][("bid", 9.0)]["qty"] == 2.0
    state.apply(
        msg(
            "walls:okx:ETHUSDT",
            "wall.gone",
            {"symbol": "ETHUSDT", "wall": wall, "reason": "pulled", "lifetimeS": 4},
        )
    )
    assert state.walls[("okx", "ETHUSDT")] == {}
    state.apply(msg("price:bybit:SOLUSDT", "price", {"price": 3.0, "ts": 1}))
    state.apply(msg("board:bybit", "board", {"ts": 1, "intervals": {}}))
    assert (state.prices[("bybit", "SOLUSDT")], state.board["bybit"]) == (
        3.0,
        {"ts": 1, "intervals": {}},
    )


STORM = 40


async def test_alerts_resume_across_killed_connections_mid_storm(server: Rampart, key: str) -> None:
    """40 alerts fire one after another while the connection is killed twice; the stream hands
    out exactly the account's inbox entries, in order, each once."""
    port = int(server.url.rsplit(":", 1)[1])
    proxy = Proxy(port)
    url = await proxy.start()
    base = price_of(server.url, key, "XRPUSDT")
    levels = [round(base * (1.5 + i * 0.005), 4) for i in range(STORM)]
    async with AsyncClient(server.url, key) as c:
        ids = [
            (
                await c.create_alert(
                    {"symbol": "XRPUSDT", "type": "price", "direction": "above", "price": lv}
                )
            )["id"]
            for lv in levels
        ]

        async def storm() -> None:
            for lv in levels:
                await asyncio.to_thread(server.trade, "XRPUSDT", lv * 1.0001)
                await asyncio.sleep(0.02)  # pacing, so the storm spans the cuts

        stream = Stream(
            url, key, ["alerts"], backoff=Backoff(initial_s=0.05, max_s=0.5), idle_timeout_s=3
        )
        got: list[StreamMessageEvent] = []

        async def read() -> None:
            async for m in stream:
                got.append(m)
                if len(got) in (8, 22):
                    proxy.cut()
                if len(got) == STORM:
                    return

        async with stream:
            await stream.connect()
            storming = asyncio.create_task(storm())
            try:
                await asyncio.wait_for(read(), WAIT_S)
            finally:
                await storming
        await proxy.close()
        inbox = [e async for e in c.iter_inbox(page=7)]
    fired = sorted(e["id"] for e in inbox if e["alertId"] in ids)
    assert len(fired) == STORM
    assert [m["id"] for m in got] == fired, "every entry once, in order"
    assert [m["data"]["alert"]["id"] for m in got] == [
        e["alertId"] for e in sorted(inbox, key=lambda e: e["id"])
    ]
    assert stream.reconnects >= 2
    server.trade("XRPUSDT", base)


def test_state_keeps_liquidations_and_perp() -> None:
    state = StreamState()

    def msg(channel: str, kind: str, data: dict[str, Any]) -> StreamMessageEvent:
        return {"channel": channel, "type": kind, "seq": 1, "ts": 0, "data": data}  # type: ignore[typeddict-item]

    liq = {"side": "long", "price": 10.0, "qty": 2.0, "usd": 20.0, "time": 1}
    state.apply(
        msg(
            "liquidations:binance:*",
            "snapshot",
            {
                "symbol": "*",
                "completeness": "largest_per_second",
                "liquidations": [liq | {"symbol": "ETHUSDT"}],
            },
        )
    )
    assert state.liquidations[("binance", "ETHUSDT")] == [liq]
    newer = liq | {"time": 2}
    state.apply(
        msg("liquidations:binance:*", "liquidation", {"symbol": "ETHUSDT", "liquidation": newer})
    )
    assert state.liquidations[("binance", "ETHUSDT")] == [newer, liq]
    state.apply(msg("perp:okx:BTCUSDT", "snapshot", {"symbol": "BTCUSDT", "markPrice": 1.0}))
    assert state.perp[("okx", "BTCUSDT")]["markPrice"] == 1.0
