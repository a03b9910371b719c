"""rampart-client: levels, walls, alerts, streams and signed webhooks of a rampart server.

``Client`` (blocking) and ``AsyncClient`` (asyncio) have the same methods, one per ``/v1``
endpoint of docs/api.md; ``Stream`` follows ``/v1/stream``; ``webhooks.verify`` checks a
signed delivery.
"""

from ._core import AUTO, METHODS, NO_RETRY, OPERATIONS, RateLimit, RetryPolicy, supports
from ._version import __version__
from .aio import AsyncClient
from .client import Client
from .errors import (
    ApiError,
    AuthenticationError,
    BadRequestError,
    ConflictingStateError,
    IncompatibleServerError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    RampartError,
    RateLimitError,
    ServerError,
    StreamClosedError,
    StreamError,
    TransportError,
    ValidationError,
    WebhookVerificationError,
)
from .stream import CHANNEL_KINDS, Backoff, Stream, StreamState, channel_name
from .webhooks import Deduplicator, verify

__all__ = [
    "AUTO",
    "CHANNEL_KINDS",
    "METHODS",
    "NO_RETRY",
    "OPERATIONS",
    "ApiError",
    "AsyncClient",
    "AuthenticationError",
    "Backoff",
    "BadRequestError",
    "Client",
    "ConflictingStateError",
    "Deduplicator",
    "IncompatibleServerError",
    "NotFoundError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "RampartError",
    "RateLimit",
    "RateLimitError",
    "RetryPolicy",
    "ServerError",
    "Stream",
    "StreamClosedError",
    "StreamError",
    "StreamState",
    "TransportError",
    "ValidationError",
    "WebhookVerificationError",
    "__version__",
    "channel_name",
    "supports",
    "verify",
]
