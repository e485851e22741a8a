"""Who may call the API: a Bearer token with the right scope, or a logged-in user with the
model permission (session cookie, CSRF checked on writes); the OpenAPI document also a staff
user's session. Nobody anonymous.

Missing or wrong credentials answer 401; known callers without the right answer 403. What a
view raises unexpectedly is answered as JSON too: 503 for a database that is away, else 500.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from functools import wraps
from typing import Any

from django.core.exceptions import SuspiciousOperation
from django.core.signals import got_request_exception
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden, UnreadablePostError
from django.http.multipartparser import MultiPartParserError
from django.middleware.csrf import CsrfViewMiddleware
from django.utils import timezone
from django.utils.log import log_response
from django.views.decorators.csrf import csrf_exempt

from django_jobs.api.errors import ApiError
from django_jobs.core.db_errors import OUTAGE, TIMEOUT, classify
from django_jobs.models.tokens import ApiToken

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
CHALLENGE = {"WWW-Authenticate": 'Bearer realm="django-jobs"'}
LAST_USED_RESOLUTION = timedelta(minutes=1)  # at most one write per token per minute


@dataclass(frozen=True)
class Need:
    """What a route asks of its caller: a token scope, or these model permissions (or, with
    ``staff``, a staff user's session without them)."""

    scope: str
    perms: tuple[str, ...]
    staff: bool = False


READ = Need("read", ("django_jobs.view_job",))
SUBMIT = Need("submit", ("django_jobs.add_job",))
CANCEL = Need("manage", ("django_jobs.cancel_job",))
RETRY = Need("manage", ("django_jobs.retry_job",))
# The OpenAPI document holds no job: a read token, or any staff user's session (the people who
# use the admin, exploring the API in a browser), but nobody anonymous.
DOCUMENT = Need("read", ("django_jobs.view_job",), staff=True)


@dataclass(frozen=True)
class Caller:
    token: ApiToken | None = None
    user: Any = None

    @property
    def owner(self) -> str:
        """Who owns idempotency keys: each token and each user has its own."""
        return f"token:{self.token.pk}" if self.token else f"user:{self.user.pk}"

    def may(self, need: Need) -> bool:
        if self.token is not None:
            return self.token.has_scope(need.scope)
        return (need.staff and self.user.is_staff) or self.user.has_perms(need.perms)


_CALLER = "django_jobs_api_caller"  # the request attribute ``endpoint`` sets


def caller_of(request: HttpRequest) -> Caller:
    """The caller ``endpoint`` authenticated for this request."""
    caller = getattr(request, _CALLER)
    if not isinstance(caller, Caller):
        raise TypeError("caller_of() is for requests routed through @endpoint")
    return caller


def authenticate(request: HttpRequest) -> Caller:
    """The caller of this request, or ApiError 401/403."""
    header = request.META.get("HTTP_AUTHORIZATION", "")
    if header:
        scheme, _, raw = header.partition(" ")
        if scheme.lower() != "bearer" or not raw.strip():
            raise ApiError(401, "use 'Authorization: Bearer <token>'", headers=CHALLENGE)
        token = ApiToken.find(raw.strip())
        if token is None:
            raise ApiError(401, "the token is unknown or revoked", headers=CHALLENGE)
        _touch(token)
        return Caller(token=token)
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated or not user.is_active:
        raise ApiError(401, "authentication required: a Bearer token or a logged-in session",
                       headers=CHALLENGE)
    if request.method not in SAFE_METHODS:
        reason = _csrf_failure(request)
        if reason:
            raise ApiError(403, f"CSRF check failed: {reason}")
    return Caller(user=user)


def endpoint(needs: dict[str, Need]) -> Callable[[Callable[..., HttpResponse]], Callable]:
    """Route ``request.method`` to a view that needs ``needs[method]``; answer errors as JSON.

    CSRF is checked here for session callers only: a Bearer token is not sent by browsers on
    their own, so forged cross-site requests cannot carry one.
    """

    def wrap(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @csrf_exempt
        @wraps(view)
        def inner(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            try:
                need = needs.get(request.method or "")
                if need is None:
                    raise ApiError(405, f"method {request.method} is not allowed here",
                                   headers={"Allow": ", ".join(needs)})
                caller = authenticate(request)
                if not caller.may(need):
                    raise ApiError(403, f"this needs the {need.scope!r} scope "
                                   f"(or the permissions {', '.join(need.perms)})")
                setattr(request, _CALLER, caller)
                return view(request, *args, **kwargs)
            except ApiError as exc:
                return exc.response()
            except (SuspiciousOperation, MultiPartParserError, UnreadablePostError) as exc:
                # Too many query fields, a malformed form body read by the CSRF check, a
                # client that hung up: Django answers these with an HTML 400; the API's is JSON.
                return ApiError(400, f"the request could not be read: {type(exc).__name__}",
                                {"request": "unreadable"}).response()
            except Exception as exc:  # Django would answer an HTML page
                return unexpected(request, exc)

        return inner

    return wrap


def unexpected(request: HttpRequest, exc: Exception) -> HttpResponse:
    """The JSON answer to what a view raised unexpectedly, logged (with the traceback) and
    signalled as Django does for the HTML page it would answer: a 503 the client may send
    again for a database that is away or timed out (``db_errors``), else a 500."""
    if isinstance(exc, DatabaseError) and classify(exc) in (OUTAGE, TIMEOUT):
        error = ApiError(503, "the database is not answering; try again shortly",
                         {"database": "unavailable"}, headers={"Retry-After": "5"})
    else:
        error = ApiError(500, f"the server failed: {type(exc).__name__}", {"server": "error"})
    response = error.response()
    got_request_exception.send(sender=None, request=request)
    log_response("%s: %s", error.detail, request.path, response=response, request=request,
                 exception=exc)
    return response


def _touch(token: ApiToken) -> None:
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)


class _CsrfCheck(CsrfViewMiddleware):
    """Django's CSRF check, keeping the reason of a rejection (the API answers it as JSON)."""

    reason: str | None = None

    def _reject(self, request: HttpRequest, reason: str) -> HttpResponseForbidden:
        self.reason = reason
        return HttpResponseForbidden(reason)


def _csrf_failure(request: HttpRequest) -> str | None:
    """Django's own CSRF check, run for session callers whatever the site's middleware."""
    check = _CsrfCheck(lambda req: HttpResponse())
    check.process_request(request)
    rejected = check.process_view(request, _any_view, (), {})
    return (check.reason or "rejected") if rejected is not None else None


def _any_view(request: HttpRequest) -> HttpResponse:
    """The view the CSRF check is asked about: one that is not exempt."""
    return HttpResponse()
