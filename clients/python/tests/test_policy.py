"""The retry policy, rate-limit headers, idempotency keys and error types, against a mock
transport (no server): each case is one scripted exchange."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from rampart import (
    NO_RETRY,
    AsyncClient,
    Client,
    RateLimitError,
    RetryPolicy,
    ServerError,
    TransportError,
    ValidationError,
)


def scripted(
    *answers: httpx.Response | Exception,
) -> tuple[httpx.MockTransport, list[httpx.Request]]:
    """A transport answering ``answers`` in order, recording the requests."""
    seen: list[httpx.Request] = []
    queue = list(answers)

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = queue.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    return httpx.MockTransport(handle), seen


def limited(retry_after: str, remaining: int = 0) -> httpx.Response:
    headers = {
        "Retry-After": retry_after,
        "X-RateLimit-Limit": "120",
        "X-RateLimit-Remaining": str(remaining),
        "X-RateLimit-Reset": retry_after,
    }
    return httpx.Response(429, headers=headers, json={"error": "rate limit exceeded"})


def ok() -> httpx.Response:
    headers = {"X-RateLimit-Limit": "120", "X-RateLimit-Remaining": "7", "X-RateLimit-Reset": "0"}
    return httpx.Response(200, json={"data": []}, headers=headers)


def alert() -> httpx.Response:
    return httpx.Response(200, json={"data": {"id": 1}})


BODY = {"symbol": "BTCUSDT", "type": "price", "direction": "above", "price": 1.0}


def client(
    transport: httpx.MockTransport, sleeps: list[float], policy: RetryPolicy | None = None
) -> Client:
    record: Callable[[float], None] = sleeps.append
    return Client("http://test", "rk_x", transport=transport, retry=policy, sleep=record)


def test_429_waits_exactly_retry_after_then_retries() -> None:
    transport, seen = scripted(limited("7"), ok())
    sleeps: list[float] = []
    c = client(transport, sleeps)
    assert c.list_alerts() == {"data": []}
    assert sleeps == [7.0]
    assert len(seen) == 2
    assert c.rate_limit is not None
    assert c.rate_limit.remaining == 7


def test_retry_after_beyond_the_bound_raises_at_once() -> None:
    transport, seen = scripted(limited("3600"))
    sleeps: list[float] = []
    with pytest.raises(RateLimitError) as e:
        client(transport, sleeps, RetryPolicy(max_retry_after_s=60)).list_alerts()
    assert (e.value.status, e.value.retry_after, e.value.message) == (
        429,
        3600.0,
        "rate limit exceeded",
    )
    assert sleeps == []
    assert len(seen) == 1


def test_attempts_are_bounded() -> None:
    transport, seen = scripted(limited("1"), limited("1"), limited("1"))
    sleeps: list[float] = []
    with pytest.raises(RateLimitError):
        client(transport, sleeps, RetryPolicy(max_attempts=3, wait_when_exhausted=False)).inbox()
    assert (len(seen), sleeps) == (3, [1.0, 1.0])


def test_exhausted_remaining_waits_for_reset_before_the_next_request() -> None:
    drained = httpx.Response(
        200,
        json={"data": []},
        headers={"X-RateLimit-Limit": "3", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "12"},
    )
    transport, _ = scripted(drained, ok())
    sleeps: list[float] = []
    c = client(transport, sleeps)
    c.inbox()
    assert sleeps == []
    c.inbox()
    assert sleeps == [12.0]


def test_5xx_on_a_get_backs_off_and_retries() -> None:
    transport, seen = scripted(httpx.Response(502), httpx.Response(503, json={"error": "x"}), ok())
    sleeps: list[float] = []
    policy = RetryPolicy(backoff_initial_s=1.0, jitter=0.0)
    client(transport, sleeps, policy).levels("BTCUSDT")
    assert (len(seen), sleeps) == (3, [1.0, 2.0])


def test_5xx_on_a_create_without_a_key_is_not_retried() -> None:
    transport, seen = scripted(httpx.Response(500))
    with pytest.raises(ServerError) as e:
        client(transport, []).create_alert(BODY, idempotency_key=None)  # type: ignore[arg-type]
    assert e.value.status == 500
    assert "idempotency-key" not in seen[0].headers


def test_a_create_sends_an_idempotency_key_and_retries_with_the_same() -> None:
    transport, seen = scripted(httpx.Response(503), httpx.ConnectError("reset"), alert())
    sleeps: list[float] = []
    made = client(transport, sleeps, RetryPolicy(jitter=0.0)).create_alert(BODY)  # type: ignore[arg-type]
    assert made["id"] == 1
    keys = {r.headers["idempotency-key"] for r in seen}
    assert len(seen) == 3
    assert len(keys) == 1
    assert len(next(iter(keys))) == 36


def test_a_given_idempotency_key_is_sent_as_is() -> None:
    transport, seen = scripted(alert())
    client(transport, []).create_alert(BODY, idempotency_key="order-17")  # type: ignore[arg-type]
    assert seen[0].headers["idempotency-key"] == "order-17"


def test_lost_answers_end_in_a_transport_error() -> None:
    transport, seen = scripted(*(httpx.ConnectError("down") for _ in range(2)))
    with pytest.raises(TransportError):
        client(transport, [], RetryPolicy(max_attempts=2)).exchanges()
    assert len(seen) == 2


def test_no_retry_policy_raises_the_first_refusal() -> None:
    transport, seen = scripted(limited("1"))
    with pytest.raises(RateLimitError):
        client(transport, [], NO_RETRY).exchanges()
    assert len(seen) == 1


def test_422_allowed_list_is_parsed() -> None:
    message = "invalid exchange 'kraken'. Allowed: binance, bybit, okx, bitget"
    transport, _ = scripted(httpx.Response(422, json={"error": message}))
    with pytest.raises(ValidationError) as e:
        client(transport, []).levels("BTCUSDT", exchange="kraken")
    assert e.value.allowed == ["binance", "bybit", "okx", "bitget"]
    assert e.value.message == message


async def test_the_async_client_follows_the_same_policy() -> None:
    transport, seen = scripted(limited("5"), ok())
    sleeps: list[float] = []

    async def record(s: float) -> None:
        sleeps.append(s)

    async with AsyncClient("http://test", "k", transport=transport, sleep=record) as c:
        assert await c.list_alerts() == {"data": []}
    assert (len(seen), sleeps) == (2, [5.0])
