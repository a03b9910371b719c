"""Every ```python block of README.md runs as written against the server, each within its
stated bound; the Discord example's webhook reaches a local receiver on a real level break."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import Rampart, Receiver, wait_for

from rampart import Client

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
#: Each block ends by itself within a minute (README.md says so).
BLOCK_S = 60


def run_block(code: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=BLOCK_S
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_readme_has_its_examples() -> None:
    assert len(BLOCKS) == 4


def test_every_python_block_runs(server: Rampart, key: str, receiver: Receiver) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAMPART_")}
    env |= {
        "RAMPART_URL": server.url,
        "RAMPART_KEY": key,
        "DISCORD_WEBHOOK_URL": receiver.url + "/discord",
    }
    outputs = [run_block(code, env) for code in BLOCKS]
    assert outputs[0].startswith("server ")
    assert "watches every binance pair" in outputs[1]
    assert "walls standing now:" in outputs[2]
    assert "verified and handled" in outputs[3]

    # The Discord alert hears of a level broken on any pair of the venue.
    with Client(server.url, key) as c:
        levels = c.levels("BTCUSDT")["data"]
        above = min((lv for lv in levels if lv["type"] == "resistance"), key=lambda lv: lv["price"])
        server.trade("BTCUSDT", above["price"] * 1.001)
        hit = wait_for(
            "the Discord message", lambda: [h for h in receiver.hits if h.path == "/discord"]
        )[0]
        body = json.loads(hit.body)
        assert "BTCUSDT broke the" in body["content"], body
        assert set(body) == {"content", "allowed_mentions"}
        for alert in c.list_alerts()["data"]:
            c.delete_alert(alert["id"])
