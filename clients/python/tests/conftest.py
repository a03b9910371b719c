"""One rampart server per test session, following the venue simulator, and helpers.

``RAMPART_BIN`` names the binary. The session starts ``rampart sim-venue`` (the simulated
Binance protocol on a free loopback port, with its ``/sim/`` control routes: a trade at a chosen
price fires alerts deterministically) and ``rampart serve --feed live`` following it, each with
its own temporary data directory, and stops both at the end. Every wait is bounded.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

#: Every wait of these tests gives up after this many seconds.
WAIT_S = 20.0
START_S = 30.0


def wait_for(what: str, probe: Callable[[], Any], timeout_s: float = WAIT_S) -> Any:
    """Polls ``probe`` every 50 ms until it answers something truthy; fails after the bound."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout_s} s")
        time.sleep(0.05)


CONFIG = """
[webhooks]
allow_private = true
previous_secret_s = 3

[plans.ci]
api = true
price_alert_cap = 500
pct_alerts = true
repeat = true
burst_per_min = 1000000
daily_quota = 100000000
operator = true
density_alert_cap = 50
stream_connections = 20

[plans.tight]
api = true
price_alert_cap = 10
pct_alerts = true
repeat = true
burst_per_min = 3
daily_quota = 1000

[venues.binance]
rest = "{url}"
ws = "{ws}"
pairs_per_connection = 8
rest_weight_per_s = 100000
connects_per_s = 100
refresh_s = 10
"""


def _first_line(proc: subprocess.Popen[str], prefix: str, lines: list[str]) -> str:
    """Reads ``proc``'s stdout until a line starting with ``prefix`` (kept draining after)."""
    found: list[str] = []
    ready = threading.Event()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith(prefix) and not found:
                found.append(line[len(prefix) :].strip())
                ready.set()
        ready.set()

    threading.Thread(target=pump, daemon=True).start()
    if not ready.wait(START_S) or not found:
        proc.kill()
        raise RuntimeError(f"no '{prefix}' line from {proc.args!r}: {lines}")
    return found[0]


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@dataclass
class Rampart:
    """The session's server and simulator."""

    bin: str
    url: str
    sim_url: str
    key: str
    config: Path
    data_dir: Path
    stdout: list[str] = field(default_factory=list)
    _sim: httpx.Client = field(default_factory=lambda: httpx.Client(timeout=10.0))

    def new_key(self, plan: str = "ci") -> str:
        """A new account on ``plan`` with one key (``rampart keys create``)."""
        out = subprocess.run(
            [
                self.bin,
                "keys",
                "create",
                "--plan",
                plan,
                "--config",
                str(self.config),
                "--data-dir",
                str(self.data_dir),
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        return out.stdout.strip().splitlines()[-1]

    def sim(self, what: str, body: dict[str, Any]) -> Any:
        """``POST /sim/<what>`` on the simulator."""
        r = self._sim.post(f"{self.sim_url}/sim/{what}", json=body)
        r.raise_for_status()
        return r.json()

    def trade(self, symbol: str, price: float) -> None:
        """A trade at ``price`` now (the pair's market continues from there)."""
        self.sim("trade", {"venue": "binance", "symbol": symbol, "price": f"{price:.8g}"})

    def true_book(self, symbol: str) -> Any:
        return self._sim.get(
            f"{self.sim_url}/sim/book", params={"venue": "binance", "symbol": symbol}
        ).json()


@pytest.fixture(scope="session")
def rampart_bin() -> str:
    path = os.environ.get("RAMPART_BIN")
    if not path or not os.access(path, os.X_OK):
        pytest.fail("set RAMPART_BIN to the rampart server binary")
    return path


@pytest.fixture(scope="session")
def server(rampart_bin: str) -> Iterator[Rampart]:
    tmp = Path(tempfile.mkdtemp(prefix="rampart-pyclient-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAMPART_")}
    env["RUST_LOG"] = "warn"
    sim = subprocess.Popen(
        [
            rampart_bin,
            "sim-venue",
            "--listen",
            "127.0.0.1:0",
            "--sim-pairs",
            "8",
            "--venues",
            "binance",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    serve: subprocess.Popen[str] | None = None
    log = tmp / "serve.log"
    try:
        sim_url = _first_line(sim, "sim-venue listening on ", [])
        config = tmp / "rampart.toml"
        config.write_text(CONFIG.format(url=sim_url, ws=sim_url.replace("http", "ws", 1)))
        data = tmp / "data"
        serve = subprocess.Popen(
            [
                rampart_bin,
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--data-dir",
                str(data),
                "--feed",
                "live",
                "--config",
                str(config),
                "--shards",
                "1",
                "--venues",
                "binance",
            ],
            stdout=subprocess.PIPE,
            stderr=log.open("w"),
            text=True,
            env=env,
        )
        lines: list[str] = []
        addr = _first_line(serve, "listening on ", lines)
        key = next(ln[len("api key: ") :] for ln in lines if ln.startswith("api key: "))
        url = f"http://{addr}"
        wait_for("server ready", lambda: _ready(url), START_S)
        yield Rampart(rampart_bin, url, sim_url, key, config, data, lines)
    finally:
        if serve is not None:
            _stop(serve)
        _stop(sim)
        shutil.rmtree(tmp, ignore_errors=True)


def _ready(url: str) -> bool:
    try:
        r = httpx.get(f"{url}/healthz", timeout=2.0)
    except httpx.HTTPError:
        return False
    # Ready, and the venue's feed is live (a trade sent to the simulator now reaches the server).
    return r.status_code == 200 and all(e["state"] == "ok" for e in r.json()["exchanges"])


@pytest.fixture
def key(server: Rampart) -> str:
    """A fresh account (plan ``ci``, unthrottled) per test: no test sees another's alerts."""
    return server.new_key("ci")


@dataclass
class Hit:
    path: str
    headers: dict[str, str]
    body: bytes


class Receiver:
    """A local HTTP receiver that records every POST and answers 200."""

    def __init__(self) -> None:
        self.hits: list[Hit] = []
        hits = self.hits

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = self.rfile.read(length)
                hits.append(Hit(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def wait(self, count: int, what: str = "webhooks") -> list[Hit]:
        wait_for(f"{count} {what}", lambda: len(self.hits) >= count)
        return list(self.hits)

    def json(self, i: int) -> Any:
        return json.loads(self.hits[i].body)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def price_of(url: str, key: str, symbol: str) -> float:
    """The pair's last price (``GET /v1/symbols/{symbol}``)."""
    r = httpx.get(f"{url}/v1/symbols/{symbol}", headers={"Authorization": f"Bearer {key}"})
    return float(r.json()["data"]["price"])
