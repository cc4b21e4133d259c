"""The two ways an alert leaves BDRE: an e-mail through Django's mail backend, and a JSON
POST to a webhook. Each raises ``DeliveryFailed`` with the reason when it could not send."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from django.conf import settings
from django.core.mail import send_mail

from alerts.checks import check_webhook


class DeliveryFailed(Exception):
    pass


def send_email(address: str, subject: str, body: str) -> None:
    try:
        sent = send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, [address])
    except (OSError, ValueError) as exc:  # smtplib's errors are OSErrors
        raise DeliveryFailed(f"{type(exc).__name__}: {exc}") from exc
    if sent != 1:
        raise DeliveryFailed("the mail backend sent nothing")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A webhook answers itself: a redirect is not followed (to another host, a file)."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_opener = urllib.request.build_opener(_NoRedirect)


def post_webhook(url: str, payload: dict[str, Any]) -> None:
    try:
        check_webhook(url, "webhook")  # stored before the check existed, or by hand
    except ValueError as exc:
        raise DeliveryFailed(str(exc)) from exc
    request = urllib.request.Request(
        url,
        data=json.dumps(payload).encode(),
        headers={"Content-Type": "application/json", "User-Agent": "bdre-alerts"},
        method="POST",
    )
    try:
        with _opener.open(request, timeout=settings.BDRE_ALERT_WEBHOOK_TIMEOUT) as answer:
            answer.read(1024)
    except urllib.error.HTTPError as exc:
        raise DeliveryFailed(f"HTTP {exc.code} {exc.reason}") from exc
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise DeliveryFailed(f"{type(exc).__name__}: {exc}") from exc
