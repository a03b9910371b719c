"""Every refusal type the server gives, as the typed exception that carries its text and status."""

from __future__ import annotations

import re

import pytest
from conftest import Rampart, price_of

from rampart import (
    NO_RETRY,
    AsyncClient,
    AuthenticationError,
    BadRequestError,
    Client,
    ConflictingStateError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    RateLimitError,
    RetryPolicy,
    StreamError,
    ValidationError,
)


def test_401_missing_and_invalid_keys(server: Rampart) -> None:
    with Client(server.url, "", retry=NO_RETRY) as c, pytest.raises(AuthenticationError) as e:
        c.exchanges()
    assert (e.value.status, e.value.message) == (401, "missing API key")
    with (
        Client(server.url, "rk_" + "0" * 32, retry=NO_RETRY) as c,
        pytest.raises(AuthenticationError) as e,
    ):
        c.exchanges()
    assert e.value.message == "invalid API key"


def test_403_a_plan_without_the_api(server: Rampart) -> None:
    with Client(server.url, server.new_key("free")) as c, pytest.raises(PermissionDeniedError) as e:
        c.levels("BTCUSDT")
    assert (e.value.status, e.value.message) == (403, "API access needs an active Developer plan")


def test_403_an_operator_endpoint(server: Rampart) -> None:
    with Client(server.url, server.key) as c, pytest.raises(PermissionDeniedError):
        c.reset_latency()


def test_404s(server: Rampart, key: str) -> None:
    with Client(server.url, key) as c:
        with pytest.raises(NotFoundError) as e:
            c.levels("NOPEUSDT")
        assert e.value.status == 404
        assert "NOPEUSDT" in e.value.message
        with pytest.raises(NotFoundError) as e:
            c.delete_alert(999_999)
        assert e.value.message == "unknown alert"
        with pytest.raises(NotFoundError):
            c.redeliver(999_999, 1)
        with pytest.raises(NotFoundError):
            c.ranking("nope")


def test_422_with_the_allowed_list(server: Rampart, key: str) -> None:
    with Client(server.url, key) as c:
        with pytest.raises(ValidationError) as e:
            c.levels("BTCUSDT", exchange="kraken")
        assert e.value.allowed == ["binance", "bybit", "okx", "bitget"]
        with pytest.raises(ValidationError) as e:
            c.list_alerts(status="x")  # type: ignore[arg-type]
        assert e.value.allowed == ["active", "triggered", "all"]
        with pytest.raises(ValidationError) as e:
            c.create_alert(
                {"symbol": "BTCUSDT", "type": "price", "direction": "above", "price": 1.0}
            )
        assert e.value.allowed is None
        assert e.value.status == 422


def test_422_an_idempotency_key_reused_with_another_body(server: Rampart, key: str) -> None:
    level = round(price_of(server.url, key, "XRPUSDT") * 3, 4)
    body = {"symbol": "XRPUSDT", "type": "price", "direction": "above", "price": level}
    with Client(server.url, key) as c:
        made = c.create_alert(body, idempotency_key="k-1")  # type: ignore[arg-type]
        with pytest.raises(ConflictingStateError) as e:
            c.create_alert(body | {"note": "other"}, idempotency_key="k-1")  # type: ignore[arg-type]
        assert e.value.message == "Idempotency-Key was already used with another body"
        c.delete_alert(made["id"])
        with pytest.raises(ConflictingStateError) as e:
            c.create_alert(body, idempotency_key="k-1")  # type: ignore[arg-type]
        assert str(made["id"]) in e.value.message


def test_400_and_405_and_413(server: Rampart, key: str) -> None:
    with Client(server.url, key) as c:
        made = c.create_alert(
            {"symbol": "ETHUSDT", "type": "price", "direction": "below", "price": 1.0}
        )
        with pytest.raises(BadRequestError) as e:
            c.request(
                "PATCH",
                f"/v1/alerts/{made['id']}",
                content=b"not json",
                headers={"content-type": "application/json"},
            )
        assert e.value.status == 400
        with pytest.raises(BadRequestError) as e:
            c.request("PUT", "/v1/levels")
        assert e.value.status == 405
        with pytest.raises(PayloadTooLargeError) as too_large:
            c.update_alert(made["id"], {"note": "x" * 70_000})
        assert too_large.value.status == 413


def test_429_carries_retry_after_and_the_policy_waits_it(server: Rampart) -> None:
    tight = server.new_key("tight")
    sleeps: list[float] = []
    with Client(server.url, tight, retry=NO_RETRY) as c:
        for _ in range(3):
            c.exchanges()
        assert c.rate_limit is not None
        assert (c.rate_limit.limit, c.rate_limit.remaining) == (3, 0)
        with pytest.raises(RateLimitError) as e:
            c.exchanges()
    assert e.value.retry_after >= 1
    assert e.value.headers["x-ratelimit-reset"] == e.value.headers["retry-after"]
    policy = RetryPolicy(max_attempts=2, max_retry_after_s=120)
    with (
        Client(server.url, tight, retry=policy, sleep=sleeps.append) as c,
        pytest.raises(RateLimitError),
    ):
        c.exchanges()
    # The recorded waits are the server's own Retry-After (the sleep is recorded, not slept).
    assert len(sleeps) == 1
    assert 1 <= sleeps[0] <= 60
    with (
        Client(server.url, tight, retry=RetryPolicy(max_retry_after_s=0.5)) as c,
        pytest.raises(RateLimitError),
    ):
        c.exchanges()


async def test_stream_refusals(server: Rampart, key: str) -> None:
    async with AsyncClient(server.url, "rk_" + "1" * 32) as c:
        with pytest.raises(AuthenticationError):
            async with c.stream(["price:binance:BTCUSDT"]) as s:
                await s.__anext__()
    async with AsyncClient(server.url, key) as c:
        with pytest.raises(StreamError, match=re.escape("unknown channel 'nope'. Allowed: ")):
            async with c.stream(["nope"], transport="websocket") as s:
                await s.__anext__()
        with pytest.raises(ValidationError, match="unknown channel"):
            async with c.stream(["nope"], transport="sse") as s:
                await s.__anext__()
