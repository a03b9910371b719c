"""Verify rampart's signed webhooks (Standard Webhooks v1, decisions.md §13).

A signed delivery carries ``webhook-id`` (``<alert.id>:<trigger.time>``, the deduplication
pair), ``webhook-timestamp`` (Unix seconds of the attempt) and ``webhook-signature``
(``v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">``; after a rotation the previous
secret also signs for 24 h, both signatures space separated). ``verify`` checks the signature
against any of the secrets given and the timestamp against a tolerance, so a replayed delivery
is refused; ``Deduplicator`` drops a redelivery of a firing already handled.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from .errors import WebhookVerificationError

__all__ = ["DEFAULT_TOLERANCE_S", "Deduplicator", "delivery_id", "sign", "verify"]

#: How far a delivery's timestamp may be from now, seconds (the Standard Webhooks default).
DEFAULT_TOLERANCE_S = 300
_PREFIX = "whsec_"


class Headers(Protocol):
    """Anything with ``items()`` of name and value: a dict, Flask's, Starlette's, http.server's."""

    def items(self) -> Iterable[tuple[str, str]]: ...


def _key(secret: str) -> bytes:
    raw = secret[len(_PREFIX) :] if secret.startswith(_PREFIX) else secret
    try:
        return base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError) as e:
        raise WebhookVerificationError("the secret is not whsec_<base64>") from e


def sign(secret: str, webhook_id: str, timestamp: int, body: bytes) -> str:
    """``v1,<signature>`` of ``body`` as rampart signs it (for tests and receivers' tests)."""
    content = f"{webhook_id}.{timestamp}.".encode() + body
    digest = hmac.new(_key(secret), content, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def _header(headers: Headers, name: str) -> str:
    for k, v in headers.items():
        if k.lower() == name:
            return v
    raise WebhookVerificationError(f"missing header {name}")


def verify(
    headers: Headers,
    body: bytes | str,
    secret: str | Sequence[str],
    *,
    tolerance_s: int = DEFAULT_TOLERANCE_S,
    now: float | None = None,
) -> dict[str, Any]:
    """The delivery's JSON body once its signature and timestamp verify, else raises
    ``WebhookVerificationError``.

    ``secret`` may be several (a receiver moving to a rotated secret holds both); a delivery
    verifies when any of its signatures matches any of them. ``body`` must be the raw bytes
    received, before any JSON parsing.
    """
    raw = body.encode() if isinstance(body, str) else body
    webhook_id = _header(headers, "webhook-id")
    stamp = _header(headers, "webhook-timestamp")
    try:
        timestamp = int(stamp)
    except ValueError as e:
        raise WebhookVerificationError(f"bad webhook-timestamp {stamp!r}") from e
    skew = (time.time() if now is None else now) - timestamp
    if skew > tolerance_s:
        raise WebhookVerificationError(f"timestamp {skew:.0f} s old (tolerance {tolerance_s} s)")
    if skew < -tolerance_s:
        raise WebhookVerificationError(f"timestamp {-skew:.0f} s ahead (tolerance {tolerance_s})")
    secrets = [secret] if isinstance(secret, str) else list(secret)
    expected = {sign(s, webhook_id, timestamp, raw) for s in secrets}
    offered = _header(headers, "webhook-signature").split()
    if not any(hmac.compare_digest(o, e) for o in offered for e in expected):
        raise WebhookVerificationError("no signature matches")
    try:
        parsed = json.loads(raw)
    except ValueError as e:
        raise WebhookVerificationError("the body is not JSON") from e
    if not isinstance(parsed, dict):
        raise WebhookVerificationError("the body is not a JSON object")
    return parsed


def delivery_id(headers: Headers, body: Mapping[str, Any]) -> str:
    """The firing's identity ``<alert.id>:<trigger.time>``: ``webhook-id`` when signed, else
    read from the body (api.md §6: the pair identifies one firing)."""
    for k, v in headers.items():
        if k.lower() == "webhook-id":
            return v
    return f"{body['alert']['id']}:{body['trigger']['time']}"


class Deduplicator:
    """Remembers the last ``capacity`` firings handled; ``first_time`` says whether one is new.

    Deliveries are at least once (a retry, a redelivery): act on a firing only when
    ``first_time(delivery_id(...))`` is true. In memory; a receiver with several processes
    keeps the ids in its database instead.
    """

    def __init__(self, capacity: int = 10_000) -> None:
        self.capacity = capacity
        self._seen: OrderedDict[str, None] = OrderedDict()

    def first_time(self, key: str) -> bool:
        """True the first time ``key`` is seen (then remembered), false after."""
        if key in self._seen:
            self._seen.move_to_end(key)
            return False
        self._seen[key] = None
        if len(self._seen) > self.capacity:
            self._seen.popitem(last=False)
        return True
