"""A FastAPI receiver of rampart's signed webhooks: verify, drop redeliveries, act.

Run: ``RAMPART_WEBHOOK_SECRET=whsec_... uvicorn fastapi_receiver:app --port 8000``
(during a secret rotation give both, comma separated: new first, old second).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from rampart.errors import WebhookVerificationError
from rampart.webhooks import Deduplicator, delivery_id, verify


def create_app(
    secrets: list[str], act: Callable[[dict[str, Any]], None], seen: Deduplicator | None = None
) -> FastAPI:
    """The app: ``POST /rampart`` verifies the delivery and calls ``act`` once per firing."""
    app = FastAPI()
    dedup = seen or Deduplicator()

    @app.post("/rampart")
    async def hook(request: Request) -> JSONResponse:
        raw = await request.body()  # the raw bytes: the signature covers them exactly
        try:
            event = verify(request.headers, raw, secrets)
        except WebhookVerificationError as e:
            return JSONResponse({"error": str(e)}, status_code=401)
        if not dedup.first_time(delivery_id(request.headers, event)):
            return JSONResponse({"status": "duplicate"})  # a retry or a redelivery: done already
        act(event)
        return JSONResponse({"status": "handled"})

    return app


def _print(event: dict[str, Any]) -> None:
    alert, trigger = event["alert"], event["trigger"]
    print(f"{event['event']}: #{alert['id']} {alert['symbol']} at {trigger['price']}")


app = create_app(os.environ.get("RAMPART_WEBHOOK_SECRET", "").split(","), _print)
