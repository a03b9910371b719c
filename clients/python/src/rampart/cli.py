"""The ``rampart`` console command: levels, walls, alerts and streams from a terminal.

The server's address and key come from ``--url``/``--key`` or ``RAMPART_URL``/``RAMPART_KEY``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

from ._version import __version__
from .client import Client
from .errors import ApiError, RampartError
from .models import Alert

#: ``tail`` stops after this many seconds unless told otherwise.
TAIL_DEFAULT_S = 60.0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rampart", description="rampart API client")
    p.add_argument("--url", help="server address (default: $RAMPART_URL)")
    p.add_argument("--key", help="API key (default: $RAMPART_KEY)")
    p.add_argument("--json", action="store_true", help="print the raw JSON answer")
    p.add_argument("--version", action="version", version=f"rampart-client {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    lv = sub.add_parser("levels", help="support and resistance zones of a pair")
    lv.add_argument("symbol")
    lv.add_argument("--exchange")
    lv.add_argument("--limit", type=int, default=10, help="zones shown (nearest first)")

    wl = sub.add_parser("walls", help="order-book walls of a pair")
    wl.add_argument("symbol")
    wl.add_argument("--exchange")

    al = sub.add_parser("alerts", help="list, create, pause, resume, test, delete alerts")
    asub = al.add_subparsers(dest="action", required=True)
    ls = asub.add_parser("list")
    ls.add_argument("--status", choices=["active", "triggered", "all"], default="active")
    cr = asub.add_parser("create")
    cr.add_argument("symbol")
    cr.add_argument("--type", choices=["price", "pct", "level", "wall"], default="price")
    cr.add_argument("--direction")
    cr.add_argument("--price", type=float)
    cr.add_argument("--pct", type=float)
    cr.add_argument("--window")
    cr.add_argument("--event")
    cr.add_argument("--exchange")
    cr.add_argument("--note")
    cr.add_argument("--webhook-url")
    cr.add_argument("--repeat", action="store_true")
    for action in ("pause", "resume", "test", "delete"):
        asub.add_parser(action).add_argument("id", type=int)

    tl = sub.add_parser("tail", help="print a stream's messages")
    tl.add_argument("channels", nargs="+", help="e.g. price:binance:BTCUSDT alerts")
    tl.add_argument("--count", type=int, help="stop after this many messages")
    tl.add_argument("--seconds", type=float, default=TAIL_DEFAULT_S, help="stop after (60)")
    tl.add_argument("--since", type=int, help="alerts: resume after this inbox id")

    sub.add_parser("version", help="the server's and this client's versions")
    return p


def _print_alert(a: Alert) -> None:
    what = a["price"] if a["type"] == "price" else a["pct"] if a["type"] == "pct" else a["event"]
    paused = " paused" if a.get("paused") else ""
    print(
        f"#{a['id']:<5} {a['exchange']:<8} {a['symbol']:<10} {a['type']:<6} "
        f"{a['direction']:<6} {what!s:<12} {a['status']}{paused} fired {a['triggerCount']}x"
        + (f"  {a['note']}" if a["note"] else "")
    )


def _levels(c: Client, args: argparse.Namespace) -> Any:
    answer = c.levels(args.symbol, exchange=args.exchange)
    if args.json:
        return answer
    print(f"{answer['symbol']}: {len(answer['data'])} zones, nearest first")
    for lv in answer["data"][: args.limit]:
        print(
            f"  {lv['type']:<10} {lv['price']:>14} {lv['timeframe']:<4} "
            f"strength {lv['strength']} (from a swing {lv['side']})"
        )
    return None


def _walls(c: Client, args: argparse.Namespace) -> Any:
    answer = c.densities(args.symbol, exchange=args.exchange)
    if args.json:
        return answer
    snap = answer["data"]
    print(f"{answer['symbol']} at {snap['price']}: {len(snap['walls'])} walls")
    for w in snap["walls"]:
        usd = f"${w['usd']:,.0f}" if w["usd"] is not None else "n/a"
        print(
            f"  {w['side']:<3} {w['price']:>14} qty {w['qty']:<12} {usd:>14} "
            f"{w['dist']:+.2f}% ratio {w['ratio']:.1f} age {w['age']:.0f}s"
        )
    return None


def _alerts(c: Client, args: argparse.Namespace) -> Any:
    if args.action == "list":
        alerts = c.list_alerts(status=args.status)
        if args.json:
            return alerts
        for a in alerts["data"]:
            _print_alert(a)
        print(f"{len(alerts['data'])} alerts ({args.status})")
        return None
    if args.action == "create":
        fields = ("direction", "price", "pct", "window", "event", "exchange", "note")
        body: dict[str, Any] = {"symbol": args.symbol, "type": args.type}
        body |= {f: getattr(args, f) for f in fields if getattr(args, f) is not None}
        if args.webhook_url:
            body["webhook_url"] = args.webhook_url
        if args.repeat:
            body["repeat"] = True
        alert = c.create_alert(body)  # type: ignore[arg-type]
        return alert if args.json else _print_alert(alert)
    if args.action in ("pause", "resume"):
        alert = c.pause_alert(args.id) if args.action == "pause" else c.resume_alert(args.id)
        return alert if args.json else _print_alert(alert)
    if args.action == "test":
        result = c.test_alert(args.id)["data"]
        if args.json:
            return result
        status, ms = result["status"], result["latencyMs"]
        print(f"test webhook: {result['outcome']} (status {status}, {ms} ms)")
        return None
    deleted = c.delete_alert(args.id)
    return deleted if args.json else print(f"deleted #{deleted['data']['id']}")


async def _tail(c: Client, args: argparse.Namespace) -> None:
    deadline = time.monotonic() + args.seconds
    handed = 0
    async with c.stream(args.channels, since=args.since) as stream:
        while time.monotonic() < deadline and (args.count is None or handed < args.count):
            try:
                m = await asyncio.wait_for(stream.__anext__(), deadline - time.monotonic())
            except (asyncio.TimeoutError, StopAsyncIteration):
                break
            handed += 1
            if args.json:
                print(json.dumps(m), flush=True)
                continue
            ident = f" #{m['id']}" if "id" in m else ""
            print(f"{m['channel']} {m['type']}{ident}: {json.dumps(m['data'])[:200]}", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; the exit status: 0 done, 1 refused or failed, 2 bad usage."""
    args = _parser().parse_args(argv)
    try:
        with Client(args.url, args.key) as c:
            if args.command == "tail":
                asyncio.run(_tail(c, args))
                return 0
            if args.command == "version":
                print(f"server {c.version()['version']}, client {__version__}")
                return 0
            run = {"levels": _levels, "walls": _walls, "alerts": _alerts}[args.command]
            answer = run(c, args)
            if answer is not None:
                print(json.dumps(answer, indent=2))
    except ApiError as e:
        allowed = f" (allowed: {', '.join(e.allowed)})" if e.allowed else ""
        print(f"error {e.status}: {e.message}{allowed}", file=sys.stderr)
        return 1
    except RampartError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
