"""Signed webhooks end to end: the server's real deliveries to a local receiver verify; forged,
replayed and stale-secret ones are refused; a rotation's overlap verifies with either secret;
the Flask and FastAPI receivers act once on a firing and its redelivery. Also ``verify``
against the Standard Webhooks reference library."""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import standardwebhooks
from conftest import Hit, Rampart, Receiver, price_of, wait_for

from rampart import Client, Deduplicator, WebhookVerificationError, verify
from rampart.webhooks import delivery_id, sign

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_verify_agrees_with_the_reference_library() -> None:
    secret = "whsec_" + base64.b64encode(os.urandom(32)).decode()
    body = b'{"event":"alert.triggered"}'
    now = int(time.time())
    headers = {
        "webhook-id": "17:1763650000123",
        "webhook-timestamp": str(now),
        "webhook-signature": sign(secret, "17:1763650000123", now, body),
    }
    assert standardwebhooks.Webhook(secret).verify(body, headers) == {"event": "alert.triggered"}
    reference = standardwebhooks.Webhook(secret).sign(
        "17:1763650000123", time_from(now), body.decode()
    )
    assert reference == headers["webhook-signature"]
    assert verify(headers, body, secret) == {"event": "alert.triggered"}
    with pytest.raises(WebhookVerificationError, match="old"):
        verify(headers, body, secret, now=now + 301)
    with pytest.raises(WebhookVerificationError, match="ahead"):
        verify(headers, body, secret, now=now - 301)
    assert verify(headers, body, secret, now=now + 299, tolerance_s=300)


def time_from(ts: int) -> Any:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(ts, tz=timezone.utc)


def _fire(server: Rampart, c: Client, receiver: Receiver, symbol: str) -> tuple[int, Hit]:
    level = round(price_of(server.url, c.key or "", symbol) * 1.3, 4)
    alert = c.create_alert(
        {
            "symbol": symbol,
            "type": "price",
            "direction": "above",
            "price": level,
            "webhook_url": receiver.url + "/rampart",
        }
    )
    server.trade(symbol, level * 1.001)
    hit = receiver.wait(1)[0]
    server.trade(symbol, level / 1.3)
    return alert["id"], hit


def test_a_signed_webhook_verified_end_to_end(
    server: Rampart, key: str, receiver: Receiver
) -> None:
    with Client(server.url, key) as c:
        first = c.rotate_webhook_secret()["data"]["secret"]
        alert_id, hit = _fire(server, c, receiver, "ADAUSDT")
        event = verify(hit.headers, hit.body, first)
        assert (event["event"], event["alert"]["id"]) == ("alert.triggered", alert_id)
        assert hit.headers["webhook-id"] == f"{alert_id}:{event['trigger']['time']}"
        assert delivery_id(hit.headers, event) == hit.headers["webhook-id"]

        # Forged: another body, another secret, a signature moved to another id; replayed: late.
        forged = hit.body.replace(b'"alert.triggered"', b'"alert.forged"')
        with pytest.raises(WebhookVerificationError):
            verify(hit.headers, forged, first)
        other = "whsec_" + base64.b64encode(b"x" * 32).decode()
        with pytest.raises(WebhookVerificationError):
            verify(hit.headers, hit.body, other)
        with pytest.raises(WebhookVerificationError):
            verify(hit.headers | {"webhook-id": "1:1"}, hit.body, first)
        with pytest.raises(WebhookVerificationError, match="old"):
            verify(hit.headers, hit.body, first, now=int(hit.headers["webhook-timestamp"]) + 301)

        # Rotation: the redelivery is signed by both secrets while the old one overlaps.
        second = c.rotate_webhook_secret()["data"]["secret"]
        assert c.webhook_signing()["data"]["previousUntil"] is not None
        c.redeliver(alert_id, event["trigger"]["time"])
        again = receiver.wait(2)[1]
        assert again.headers["webhook-id"] == hit.headers["webhook-id"]
        assert len(again.headers["webhook-signature"].split()) == 2
        assert verify(again.headers, again.body, first) == event
        assert verify(again.headers, again.body, second) == event
        assert verify(again.headers, again.body, [second, first]) == event

        # After the overlap (3 s in this server's config) the old secret no longer signs.
        wait_for("the overlap's end", lambda: c.webhook_signing()["data"]["previousUntil"] is None)
        assert c.test_alert(alert_id)["data"]["outcome"] == "delivered"
        test = receiver.wait(3)[2]
        assert len(test.headers["webhook-signature"].split()) == 1
        assert verify(test.headers, test.body, second)["event"] == "alert.test"
        with pytest.raises(WebhookVerificationError):
            verify(test.headers, test.body, first)
        c.end_webhook_signing()


@pytest.mark.parametrize("framework", ["flask", "fastapi"])
def test_the_receiver_examples_act_once_per_firing(
    server: Rampart, key: str, receiver: Receiver, framework: str
) -> None:
    with Client(server.url, key) as c:
        secret = c.rotate_webhook_secret()["data"]["secret"]
        alert_id, hit = _fire(server, c, receiver, "DOGEUSDT")
        trigger_time = json.loads(hit.body)["trigger"]["time"]
        c.redeliver(alert_id, trigger_time)
        redelivered = receiver.wait(2)[1]
    acted: list[dict[str, Any]] = []
    if framework == "flask":
        app = _example("flask_receiver").create_app([secret], acted.append)
        post = app.test_client().post
        answers = [post("/rampart", data=h.body, headers=h.headers) for h in (hit, redelivered)]
        forged = post("/rampart", data=hit.body + b" ", headers=hit.headers)
        statuses = [(a.status_code, a.get_json()["status"]) for a in answers]
    else:
        from fastapi.testclient import TestClient

        client = TestClient(_example("fastapi_receiver").create_app([secret], acted.append))
        answers = [
            client.post("/rampart", content=h.body, headers=h.headers) for h in (hit, redelivered)
        ]
        forged = client.post("/rampart", content=hit.body + b" ", headers=hit.headers)
        statuses = [(a.status_code, a.json()["status"]) for a in answers]
    assert statuses == [(200, "handled"), (200, "duplicate")]
    assert forged.status_code == 401
    assert [e["alert"]["id"] for e in acted] == [alert_id]


def test_deduplicator_is_bounded() -> None:
    d = Deduplicator(capacity=2)
    assert [d.first_time(k) for k in ("a", "b", "a", "c", "b")] == [True, True, False, True, True]
