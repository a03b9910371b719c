"""The ``rampart`` console command of the installed package, against the server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import Rampart, Receiver, price_of

#: The console script installed beside this interpreter.
CLI = str(Path(sys.executable).parent / "rampart")


def cli(server: Rampart, key: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAMPART_")}
    env |= {"RAMPART_URL": server.url, "RAMPART_KEY": key}
    return subprocess.run([CLI, *args], env=env, capture_output=True, text=True, timeout=60)


def test_levels_walls_and_version(server: Rampart, key: str) -> None:
    out = cli(server, key, "levels", "BTCUSDT", "--limit", "2")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("BTCUSDT: ")
    assert len(out.stdout.splitlines()) == 3
    assert cli(server, key, "version").stdout.startswith("server 0.")
    walls = cli(server, key, "walls", "NOPEUSDT")
    assert (walls.returncode, walls.stderr.split(":")[0]) == (1, "error 404")
    bad = cli(server, key, "levels", "BTCUSDT", "--exchange", "kraken")
    assert "(allowed: binance, bybit, okx, bitget)" in bad.stderr


def test_alerts_create_list_pause_test_delete(
    server: Rampart, key: str, receiver: Receiver
) -> None:
    level = f"{price_of(server.url, key, 'ETHUSDT') * 3:.2f}"
    made = cli(
        server,
        key,
        "alerts",
        "create",
        "ETHUSDT",
        "--direction",
        "above",
        "--price",
        level,
        "--note",
        "cli",
        "--webhook-url",
        receiver.url + "/cli",
    )
    assert made.returncode == 0, made.stderr
    alert_id = made.stdout.split()[0].lstrip("#")
    listed = cli(server, key, "alerts", "list").stdout
    assert f"#{alert_id}" in listed
    assert "1 alerts (active)" in listed
    assert "paused" in cli(server, key, "alerts", "pause", alert_id).stdout
    assert "paused" not in cli(server, key, "alerts", "resume", alert_id).stdout
    assert (
        "test webhook: delivered (status 200" in cli(server, key, "alerts", "test", alert_id).stdout
    )
    assert receiver.wait(1)[0].path == "/cli"
    assert cli(server, key, "alerts", "delete", alert_id).stdout.strip() == f"deleted #{alert_id}"


def test_tail_stops_after_its_count(server: Rampart, key: str) -> None:
    out = cli(server, key, "tail", "price:binance:BTCUSDT", "--count", "2", "--seconds", "20")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("price:binance:BTCUSDT snapshot: ")
