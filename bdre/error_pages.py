"""Error answers: the site's own pages (templates/400.html, 403.html, 404.html, 500.html)
for pages, JSON for the API, whatever DEBUG is.

Django answers through the ``handler*`` views below only when DEBUG is false; with DEBUG it
shows its own debug pages, a traceback to anyone who can reach the server. The middleware
answers the errors of every view itself, so both modes look the same to a user; the
handlers still serve what no view raised (an unknown URL, an error in a middleware)."""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.exceptions import BadRequest, PermissionDenied, SuspiciousOperation
from django.core.signals import got_request_exception
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.template import loader

logger = logging.getLogger("django.request")

API_PREFIX = "/api/"

TEXTS = {
    400: "The request could not be read.",
    403: "You may not do this.",
    404: "There is nothing here, or it belongs to a team you are not in.",
    500: "Something went wrong on our side; it has been logged.",
}


def _message(exception: BaseException | None, status: int) -> str:
    # A 403 says what role it needs (the views give the reason); any other text stays
    # private: a 404's names what was looked for, a 500's may reveal internals.
    if status == 403 and exception is not None and exception.args and exception.args[0]:
        return str(exception.args[0])
    return TEXTS[status]


def _answer(request: HttpRequest, status: int, exception: BaseException | None) -> HttpResponse:
    if request.path.startswith(API_PREFIX):
        detail = {404: "Not found.", 500: "Server error."}.get(status, _message(exception, status))
        response: HttpResponse = JsonResponse({"detail": detail}, status=status)
    else:
        template = loader.get_template(f"{status}.html")
        # The 500 page is drawn without the request: the database may be what failed, and
        # the layout's context (the user, the teams) reads it.
        context = {"message": _message(exception, status), "status": status}
        body = template.render(context, None if status == 500 else request)
        response = HttpResponse(body, status=status)
    response.bdre_error_page = True  # type: ignore[attr-defined]
    return response


def bad_request(request: HttpRequest, exception: BaseException | None = None) -> HttpResponse:
    return _answer(request, 400, exception)


def permission_denied(request: HttpRequest, exception: BaseException | None = None) -> HttpResponse:
    return _answer(request, 403, exception)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """A form whose CSRF token is missing or stale (a page left open past a new sign-in)."""
    message = "The form has expired or came from another site: reload the page and send it again."
    return _answer(request, 403, PermissionDenied(message))


def page_not_found(request: HttpRequest, exception: BaseException | None = None) -> HttpResponse:
    return _answer(request, 404, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    return _answer(request, 500, None)


class ErrorPageMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (
            settings.DEBUG
            and response.status_code == 404
            and not getattr(response, "bdre_error_page", False)
            and "text/html" in response.get("Content-Type", "")
        ):
            # An unknown URL: Django drew its debug page (the URL patterns) before any view.
            return page_not_found(request)
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, Http404):
            return page_not_found(request, exception)
        if isinstance(exception, PermissionDenied):
            return permission_denied(request, exception)
        if isinstance(exception, BadRequest | SuspiciousOperation):
            logging.getLogger(f"django.security.{type(exception).__name__}").error(
                "%s", exception, extra={"status_code": 400, "request": request}
            )
            return bad_request(request, exception)
        # What Django does for an uncaught exception, but with our page in both modes: log
        # it with its traceback, tell the listeners (the test client re-raises it).
        got_request_exception.send(sender=None, request=request)
        logger.error(
            "Internal Server Error: %s",
            request.path,
            exc_info=exception,
            extra={"status_code": 500, "request": request},
        )
        response = server_error(request)
        response._has_been_logged = True  # type: ignore[attr-defined]
        return response
