"""A Flask receiver of rampart's signed webhooks: verify, drop redeliveries, act.

Run: ``RAMPART_WEBHOOK_SECRET=whsec_... flask --app flask_receiver run --port 8000``
(during a secret rotation give both, comma separated: new first, old second).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from flask import Flask, Response, jsonify, request

from rampart.errors import WebhookVerificationError
from rampart.webhooks import Deduplicator, delivery_id, verify


def create_app(
    secrets: list[str], act: Callable[[dict[str, Any]], None], seen: Deduplicator | None = None
) -> Flask:
    """The app: ``POST /rampart`` verifies the delivery and calls ``act`` once per firing."""
    app = Flask(__name__)
    dedup = seen or Deduplicator()

    @app.post("/rampart")
    def hook() -> tuple[Response, int]:
        raw = request.get_data()  # the raw bytes: the signature covers them exactly
        try:
            event = verify(request.headers, raw, secrets)
        except WebhookVerificationError as e:
            return jsonify(error=str(e)), 401
        if not dedup.first_time(delivery_id(request.headers, event)):
            return jsonify(status="duplicate"), 200  # a retry or a redelivery: done already
        act(event)
        return jsonify(status="handled"), 200

    return app


def _print(event: dict[str, Any]) -> None:
    alert, trigger = event["alert"], event["trigger"]
    print(f"{event['event']}: #{alert['id']} {alert['symbol']} at {trigger['price']}")


if __name__ == "__main__":
    create_app(os.environ["RAMPART_WEBHOOK_SECRET"].split(","), _print).run(port=8000)
