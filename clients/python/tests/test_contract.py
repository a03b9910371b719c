"""The client against the contract's documents, no server needed.

- ``models.py`` is exactly what ``tools/gen_models.py`` makes of ``docs/openapi.json``.
- Every ``/v1`` operation of openapi.json (operationId, method, path) is in ``OPERATIONS`` and
  mapped to a method of both clients, and calling that method sends that method and path.
- ``Client`` and ``AsyncClient`` have the same methods with the same parameters.
- The stream channel kinds are the §12 channel list of docs/decisions.md.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

import rampart
from rampart import METHODS, OPERATIONS, AsyncClient, Client

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
SPEC = json.loads((ROOT / "docs" / "openapi.json").read_text(encoding="utf-8"))


def _v1_operations() -> dict[str, tuple[str, str]]:
    ops = {}
    for path, item in SPEC["paths"].items():
        for method, op in item.items():
            if isinstance(op, dict) and path.startswith("/v1"):
                ops[op["operationId"]] = (method.upper(), path)
    return ops


def test_models_are_generated_from_openapi() -> None:
    spec = importlib.util.spec_from_file_location(
        "gen_models", HERE.parent / "tools" / "gen_models.py"
    )
    assert spec is not None
    assert spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    expected = gen.formatted(gen.generate(SPEC))
    installed = Path(rampart.models.__file__).read_text(encoding="utf-8")
    assert installed == expected, "run tools/gen_models.py: models.py differs from openapi.json"


def test_the_package_under_test_is_the_installed_one() -> None:
    # ci.sh installs ./clients/python into the venv as a user would; the tests import that copy.
    assert "site-packages" in Path(rampart.__file__).parts
    assert (Path(rampart.__file__).parent / "py.typed").exists()


def test_every_v1_operation_is_in_the_table() -> None:
    assert _v1_operations() == OPERATIONS
    assert set(METHODS) == set(OPERATIONS)


@pytest.mark.parametrize("cls", [Client, AsyncClient])
def test_every_operation_has_a_method(cls: type) -> None:
    missing = [m for m in METHODS.values() if not callable(getattr(cls, m, None))]
    assert not missing


def test_sync_and_async_clients_have_the_same_methods() -> None:
    def public(cls: type) -> dict[str, list[str]]:
        return {
            name: list(inspect.signature(fn).parameters)
            for name, fn in inspect.getmembers(cls, inspect.isfunction)
            if not name.startswith("_")
        }

    assert public(Client) == public(AsyncClient)


#: One call per method with sample arguments; the request each sends is checked against
#: openapi.json's method and path.
SAMPLES: dict[str, tuple[tuple[Any, ...], dict[str, Any], str]] = {
    "levels": (("BTCUSDT",), {"exchange": "binance"}, "/v1/levels/BTCUSDT"),
    "levels_bulk": ((), {"symbols": ["A", "B"]}, "/v1/levels"),
    "densities": (("BTCUSDT",), {}, "/v1/densities/BTCUSDT"),
    "densities_bulk": ((), {}, "/v1/densities"),
    "wall_history": (("BTCUSDT",), {"side": "bid"}, "/v1/walls/BTCUSDT/history"),
    "wall_history_bulk": ((), {"min_usd": 1.5}, "/v1/walls/history"),
    "perp": (("BTCUSDT",), {"exchange": "okx"}, "/v1/perp/BTCUSDT"),
    "perp_history": (("BTCUSDT",), {"interval": "4h"}, "/v1/perp/BTCUSDT/history"),
    "perp_bulk": ((), {"symbols": ["A", "B"]}, "/v1/perp"),
    "liquidations": (("BTCUSDT",), {"side": "long", "limit": 5}, "/v1/liquidations/BTCUSDT"),
    "liquidations_bulk": ((), {"min_usd": 1000.0}, "/v1/liquidations"),
    "list_alerts": ((), {"status": "all"}, "/v1/alerts"),
    "create_alert": (
        ({"symbol": "X", "type": "price", "direction": "above", "price": 1.0},),
        {},
        "/v1/alerts",
    ),
    "update_alert": ((7, {"note": "n"}), {}, "/v1/alerts/7"),
    "delete_alert": ((7,), {}, "/v1/alerts/7"),
    "inbox": ((), {"limit": 5, "before": 9}, "/v1/inbox"),
    "exchanges": ((), {}, "/v1/exchanges"),
    "symbols": (("binance",), {}, "/v1/exchanges/binance/symbols"),
    "symbol": (("BTCUSDT",), {}, "/v1/symbols/BTCUSDT"),
    "latency": ((), {}, "/v1/debug/latency"),
    "reset_latency": ((), {}, "/v1/debug/latency"),
    "metrics": (("BTCUSDT",), {"usd": True}, "/v1/metrics/BTCUSDT"),
    "metrics_bulk": ((), {"interval": "1h"}, "/v1/metrics"),
    "ranking": (("gainers",), {"limit": 3}, "/v1/rankings/gainers"),
    "market": ((), {}, "/v1/market"),
    "candles": (("BTCUSDT",), {"limit": 2}, "/v1/candles/BTCUSDT"),
    "book": (("BTCUSDT",), {}, "/v1/book/BTCUSDT"),
    "webhook_signing": ((), {}, "/v1/webhook-secret"),
    "rotate_webhook_secret": ((), {}, "/v1/webhook-secret"),
    "end_webhook_signing": ((), {}, "/v1/webhook-secret"),
    "deliveries": ((7,), {"limit": 3}, "/v1/alerts/7/deliveries"),
    "redeliver": ((7, 1763650000123), {}, "/v1/alerts/7/deliveries/1763650000123/redeliver"),
    "test_alert": ((7,), {}, "/v1/alerts/7/test"),
}


def _template_matches(template: str, path: str) -> bool:
    pattern = re.sub(r"\\{[^}]+\\}", "[^/]+", re.escape(template))
    return re.fullmatch(pattern, path) is not None


def test_each_method_sends_its_operation() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"data": {}})

    by_method = {m: op for op, m in METHODS.items()}
    with Client("http://test", "k", transport=httpx.MockTransport(answer)) as c:
        for name, (args, kwargs, path) in SAMPLES.items():
            getattr(c, name)(*args, **kwargs)
            method, template = OPERATIONS[by_method[name]]
            request = seen[-1]
            assert (request.method, request.url.path) == (method, path), name
            assert _template_matches(template, request.url.path), name
    assert set(SAMPLES) | {"stream"} == set(METHODS.values())


async def test_each_async_method_sends_its_operation() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"data": {}})

    async with AsyncClient("http://test", "k", transport=httpx.MockTransport(answer)) as c:
        for name, (args, kwargs, path) in SAMPLES.items():
            await getattr(c, name)(*args, **kwargs)
            assert seen[-1].url.path == path, name


def _section_12_channels() -> list[str]:
    text = (ROOT / "docs" / "decisions.md").read_text(encoding="utf-8")
    section = text.split("\n## 12.", 1)[1].split("\n## 13.", 1)[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("  | `")]
    return [re.match(r"\s*\| `([a-z]+)", row).group(1) for row in rows]  # type: ignore[union-attr]


def _section_17_channels() -> list[str]:
    text = (ROOT / "docs" / "decisions.md").read_text(encoding="utf-8")
    section = text.split("\n### Streams (§12 gains two channels)", 1)[1].split("\n### ", 1)[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("| `")]
    return [re.match(r"\| `([a-z]+)", row).group(1) for row in rows]  # type: ignore[union-attr]


def test_channel_kinds_are_the_decisions_list() -> None:
    kinds = _section_12_channels() + _section_17_channels()
    assert kinds == ["price", "levels", "walls", "board", "alerts", "liquidations", "perp"]
    assert list(rampart.CHANNEL_KINDS) == kinds
    for kind in kinds:
        name = (
            rampart.channel_name(kind)
            if kind == "alerts"
            else rampart.channel_name(kind, "binance", "BTCUSDT")
        )
        assert name.split(":")[0] == kind


def test_stream_op_model_matches_the_schema() -> None:
    props = SPEC["components"]["schemas"]["StreamOp"]["properties"]
    assert set(rampart.models.StreamOp.__annotations__) == set(props)
