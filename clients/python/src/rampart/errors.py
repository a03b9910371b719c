"""Typed exceptions: every refusal of the server carries its ``{"error"}`` text and status."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "ApiError",
    "AuthenticationError",
    "BadRequestError",
    "ConflictingStateError",
    "IncompatibleServerError",
    "NotFoundError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "RampartError",
    "RateLimitError",
    "ServerError",
    "StreamClosedError",
    "StreamError",
    "TransportError",
    "ValidationError",
    "WebhookVerificationError",
    "parse_allowed",
]


class RampartError(Exception):
    """The base of every exception this package raises."""


class TransportError(RampartError):
    """No answer: the connection failed or timed out (after the retry policy's attempts)."""


class ApiError(RampartError):
    """An answer with a status of 400 or more; ``message`` is the server's ``error`` text."""

    def __init__(self, status: int, message: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message
        self.headers: dict[str, str] = {k.lower(): v for k, v in (headers or {}).items()}
        self.allowed: list[str] | None = parse_allowed(message)


class BadRequestError(ApiError):
    """400, 405 and other malformed-request statuses."""


class AuthenticationError(ApiError):
    """401: the API key is missing, invalid or revoked."""


class PermissionDeniedError(ApiError):
    """403: the key's plan has no API access (or lacks ``operator``)."""


class NotFoundError(ApiError):
    """404: unknown symbol, alert, delivery, category; densities of a pair with no wall."""


class PayloadTooLargeError(ApiError):
    """413: a request body over 64 KiB."""


class ValidationError(ApiError):
    """422: a parameter failed validation; ``allowed`` holds the legal values when listed."""


class ConflictingStateError(ValidationError):
    """422 for a request that conflicts with stored state (an ``Idempotency-Key`` reused)."""


class RateLimitError(ApiError):
    """429: burst, quota or open streams exceeded; ``retry_after`` in seconds."""

    def __init__(self, status: int, message: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(status, message, headers)
        self.retry_after: float = _seconds(self.headers.get("retry-after"))


class ServerError(ApiError):
    """5xx: a fault inside the service (503 ``starting`` included)."""


class IncompatibleServerError(RampartError):
    """The server's ``/version`` is outside what this client supports (README, version policy)."""


class StreamError(RampartError):
    """The stream refused an op: ``{"type":"error","id","error"}``."""


class StreamClosedError(StreamError):
    """The server ended the stream for good (4401 key revoked, 1008 too many errors)."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(f"stream closed {code}: {reason}")
        self.code = code
        self.reason = reason


class WebhookVerificationError(RampartError):
    """A webhook whose signature, timestamp or headers do not verify."""


def parse_allowed(message: str) -> list[str] | None:
    """The values after ``Allowed:`` in a 422 message (``a, b, c``), or ``None``."""
    marker = "Allowed: "
    at = message.find(marker)
    if at < 0:
        return None
    values = message[at + len(marker) :].split(",")
    return [v.strip() for v in values if v.strip()]


def _seconds(value: str | None) -> float:
    try:
        return max(0.0, float(value)) if value is not None else 0.0
    except ValueError:
        return 0.0


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    405: BadRequestError,
    408: BadRequestError,
    413: PayloadTooLargeError,
    414: BadRequestError,
    422: ValidationError,
    429: RateLimitError,
    431: BadRequestError,
}


def error_for(status: int, message: str, headers: Mapping[str, str]) -> ApiError:
    """The exception for an answer of ``status`` with ``message``."""
    if status == 422 and message.startswith("Idempotency-Key"):
        return ConflictingStateError(status, message, headers)
    cls = _BY_STATUS.get(status, ServerError if status >= 500 else ApiError)
    return cls(status, message, headers)
