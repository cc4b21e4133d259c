"""The two ways an alert leaves BDRE: an e-mail through Django's mail backend, and a JSON
POST to a webhook. Each raises ``DeliveryFailed`` when it could not send."""

from __future__ import annotations

import http.client
import json
from typing import Any

from django.conf import settings
from django.core.mail import send_mail

from alerts import outbound

# What the team reads when a webhook was not delivered, whatever the reason: a refused
# connection, a dropped one, a status or a service that is no HTTP server, told apart, would
# make the webhook a scanner of the installation's network. The reason goes to the log.
COULD_NOT_DELIVER = "could not deliver (the reason is in the installation's log)"


class DeliveryFailed(Exception):
    """``str()``: what the alert's record says to the team; ``reason``: what the
    installation's log says."""

    def __init__(self, shown: str, reason: str = "") -> None:
        super().__init__(shown)
        self.reason = reason or shown


def send_email(address: str, subject: str, body: str) -> None:
    try:
        sent = send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, [address])
    except (OSError, ValueError) as exc:  # smtplib's errors are OSErrors
        raise DeliveryFailed(f"{type(exc).__name__}: {exc}") from exc
    if sent != 1:
        raise DeliveryFailed("the mail backend sent nothing")


def post_webhook(url: str, payload: dict[str, Any]) -> None:
    """POST the payload; only a 2xx answer is a delivery (a redirect is not followed)."""
    try:
        status = outbound.post(
            url,
            json.dumps(payload).encode(),
            {"Content-Type": "application/json", "User-Agent": "bdre-alerts"},
            settings.BDRE_ALERT_WEBHOOK_TIMEOUT,
        )
    except (outbound.Refused, http.client.HTTPException, OSError, ValueError) as exc:
        # ssl's errors and timeouts are OSErrors; an answer that is not HTTP (BadStatusLine)
        # is an HTTPException.
        raise DeliveryFailed(COULD_NOT_DELIVER, f"{type(exc).__name__}: {exc}") from exc
    if not 200 <= status < 300:
        raise DeliveryFailed(COULD_NOT_DELIVER, f"HTTP {status}")
