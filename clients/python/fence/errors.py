"""Exceptions of the fence client, one per problem code of the v1 API.

Every error a fence server answers is an RFC 9457 problem with a stable
``code``; :func:`problem_error` turns it into the exception of that code
(:data:`CODES`), so callers write ``except FencedError`` instead of comparing
strings. Errors that never reached a server (a connection refused, a lease
that has ended) are exceptions of this module too, with ``status`` None.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Mapping, Optional, Type

__all__ = [
    "FenceError",
    "FencedError",
    "TokenNotIssuedError",
    "LockHeldError",
    "LeaseLostError",
    "RateLimitedError",
    "FenceRequiredError",
    "InvalidTokenError",
    "InvalidSequencerError",
    "PreconditionFailedError",
    "NotFoundError",
    "BadRequestError",
    "TooLargeError",
    "UnauthorizedError",
    "ForbiddenError",
    "MethodNotAllowedError",
    "NotLeaderError",
    "UnavailableError",
    "NotReadyError",
    "InternalError",
    "TransportError",
    "LeaseExpiredError",
    "LeaseEndedError",
    "SessionEndedError",
    "SSEError",
    "CODES",
    "problem_error",
    "is_ambiguous",
    "is_lost",
]


class FenceError(Exception):
    """Base class of every error of the fence client.

    For an error answered by a server, ``status`` is the HTTP status, ``code``
    the problem's stable code (such as ``"fenced"``; ``""`` if the body was not
    a problem of this API), ``detail`` what went wrong, ``problem`` the decoded
    problem body (a dict, empty if there was none) and ``headers`` the
    response headers. For an error raised by the client itself ``status`` is
    None.

    ``maybe_applied`` is True when an earlier attempt of the same call left
    its outcome unknown (a transport error or a 503 once connected): the
    request may have taken effect then, whatever this error says.
    ``earlier`` is that attempt's error. See :func:`is_ambiguous`.
    """

    #: The problem code this class stands for; "" for the base class.
    default_code: str = ""

    def __init__(
        self,
        message: Optional[str] = None,
        *,
        status: Optional[int] = None,
        code: Optional[str] = None,
        detail: str = "",
        title: str = "",
        problem: Optional[Mapping[str, Any]] = None,
        headers: Optional[Mapping[str, str]] = None,
    ) -> None:
        self.status = status
        self.code = self.default_code if code is None else code
        self.detail = detail or (message or "")
        self.title = title
        self.problem: Dict[str, Any] = dict(problem or {})
        self.headers: Dict[str, str] = dict(headers or {})
        self.resource: Optional[str] = self.problem.get("resource") if isinstance(self.problem.get("resource"), str) else None
        self.maybe_applied = False
        self.earlier: Optional[BaseException] = None
        self._message = message
        super().__init__(message or self.detail)

    def _describe(self) -> str:
        if self._message:
            return self._message
        text = self.detail or self.title or "error"
        if self.status is not None:
            where = "HTTP %d" % self.status
            if self.code:
                where = "%s %s" % (where, self.code)
            return "%s (%s)" % (text, where)
        return text

    def __str__(self) -> str:
        s = self._describe()
        if self.maybe_applied and self.earlier is not None:
            s += "; an earlier attempt may have taken effect: %s" % (self.earlier,)
        return s


def _int(problem: Mapping[str, Any], name: str) -> int:
    v = problem.get(name)
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    return 0


def _retry_after(problem: Mapping[str, Any], headers: Mapping[str, str]) -> Optional[float]:
    """Seconds from retry_after_ms, else from the Retry-After header."""
    ms = problem.get("retry_after_ms")
    if isinstance(ms, (int, float)) and not isinstance(ms, bool) and ms > 0:
        return ms / 1000.0
    for k, v in headers.items():
        if k.lower() == "retry-after":
            v = v.strip()
            if v.isascii() and v.isdigit():
                return float(int(v))
    return None


class FencedError(FenceError):
    """409 ``fenced``: the token presented is lower than the resource's last
    fence: a newer holder exists, the caller must stop writing.

    ``presented`` is the token sent, ``last_fence`` the resource's fence when
    the write was rejected."""

    default_code = "fenced"

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.presented = _int(self.problem, "presented")
        self.last_fence = _int(self.problem, "last_fence")


class TokenNotIssuedError(FenceError):
    """409 ``token_not_issued``: the token is greater than any the lock service
    has issued for the resource (forged, or from another system).
    ``presented`` and ``last_token`` (the highest issued) say which."""

    default_code = "token_not_issued"

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.presented = _int(self.problem, "presented")
        self.last_token = _int(self.problem, "last_token")


class LockHeldError(FenceError):
    """409 ``lock_held``: another holder kept the lock for the whole wait.
    ``retry_after`` is the number of seconds (a float, from ``retry_after_ms``
    or the Retry-After header) until the current lease expires, if nobody
    renews it; None if the server did not say."""

    default_code = "lock_held"

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.retry_after = _retry_after(self.problem, self.headers)


class LeaseLostError(FenceError):
    """409 ``lease_lost``: a renew or release whose token is not the
    resource's current, unexpired lease. ``presented`` is the token sent,
    ``current`` the current lease's token (0 if the resource is free)."""

    default_code = "lease_lost"

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.presented = _int(self.problem, "presented")
        self.current = _int(self.problem, "current")


class RateLimitedError(FenceError):
    """429 ``rate_limited``: the client sent more requests than the server's
    rate limit allows. ``retry_after`` is the number of seconds to wait."""

    default_code = "rate_limited"

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.retry_after = _retry_after(self.problem, self.headers)


class FenceRequiredError(FenceError):
    """428 ``fence_required``: a mutating storage request without a
    Fencing-Token."""

    default_code = "fence_required"


class InvalidTokenError(FenceError):
    """400 ``invalid_token``: a token that is not an integer in 1..2^63-1.
    The client raises it too, with ``status`` None, before sending such a
    token."""

    default_code = "invalid_token"


class InvalidSequencerError(FenceError):
    """403 ``invalid_sequencer``: a sequencer that is malformed, signed by an
    unknown key, badly signed, or not for the resource and token it came with.
    :func:`fence.verify_sequencer` raises it too (``status`` None), with
    ``reason`` one of ``"malformed"``, ``"unknown key id"``,
    ``"bad signature"``, ``"wrong resource"``, ``"wrong token"``."""

    default_code = "invalid_sequencer"

    def __init__(self, *args: Any, reason: str = "", **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.reason = reason


class PreconditionFailedError(FenceError):
    """412 ``precondition_failed``: an If-Match, If-None-Match or txn compare
    that does not hold."""

    default_code = "precondition_failed"


class NotFoundError(FenceError):
    """404 ``not_found``: a key that does not exist (or a path the server
    does not serve)."""

    default_code = "not_found"


class BadRequestError(FenceError):
    """400 ``bad_request``: malformed JSON, unknown fields, a name or TTL out
    of range, a malformed Last-Event-ID."""

    default_code = "bad_request"


class TooLargeError(FenceError):
    """413 ``too_large``: a body over the limit (values: 1 MiB)."""

    default_code = "too_large"


class UnauthorizedError(FenceError):
    """401 ``unauthorized``: auth is on and the request has no valid bearer
    token."""

    default_code = "unauthorized"


class ForbiddenError(FenceError):
    """403 ``forbidden``: the token has no grant of the permission the
    request needs on its resource."""

    default_code = "forbidden"


class MethodNotAllowedError(FenceError):
    """405 ``method_not_allowed``: the path does not answer the method; the
    ``Allow`` header lists the ones it does."""

    default_code = "method_not_allowed"


class NotLeaderError(FenceError):
    """503 ``not_leader``: the server does not lead its cluster and could not
    forward the request. Nothing was applied: any call may be retried, on
    another server if needed (the client does so by itself)."""

    default_code = "not_leader"


class UnavailableError(FenceError):
    """503 ``unavailable``: the server is shutting down, or the request was
    cut short: the outcome of a change is unknown."""

    default_code = "unavailable"


class NotReadyError(FenceError):
    """503 ``not_ready``: GET /readyz of a server that would not serve a
    request now."""

    default_code = "not_ready"


class InternalError(FenceError):
    """500 ``internal``: the server failed; the cause is in its log."""

    default_code = "internal"


class TransportError(FenceError):
    """No answer from the server: the connection could not be made, broke,
    or timed out. ``sent`` is False when no connection could be made, so the
    server certainly received nothing; when True the request may have taken
    effect (see :func:`is_ambiguous`). ``addr`` is the server's base URL."""

    def __init__(self, message: str, *, sent: bool, addr: str = "", cause: Optional[BaseException] = None) -> None:
        super().__init__(message)
        self.sent = sent
        self.addr = addr
        self.__cause__ = cause


class LeaseExpiredError(FenceError):
    """No renewal of the lease succeeded before its local deadline (the TTL
    less the safety margin, counted from when the last successful renewal was
    sent): the lock service may have given the lock to someone else.
    ``last_error`` is the last renewal's error, if any."""

    def __init__(self, resource: str, token: int, last_error: Optional[BaseException] = None) -> None:
        msg = "lease on %r (token %d) expired by the local clock before a renewal succeeded" % (resource, token)
        if last_error is not None:
            msg += " (last renewal: %s)" % (last_error,)
        super().__init__(msg)
        self.resource = resource
        self.token = token
        self.last_error = last_error


class SessionEndedError(FenceError):
    """The session a lease was in ended (released, lost or expired), and the
    lease with it. ``session`` is the session's resource, ``reason`` the
    session's ``error`` (None if it was released)."""

    def __init__(self, resource: str, token: int, session: str, reason: Optional[BaseException]) -> None:
        how = "was released" if reason is None else "ended: %s" % (reason,)
        super().__init__("lease on %r (token %d): its session %r %s" % (resource, token, session, how))
        self.resource = resource
        self.token = token
        self.session = session
        self.reason = reason


class LeaseEndedError(FenceError):
    """A write through a lease that has ended (lost, expired or released):
    the client refuses it without sending it. ``reason`` is the lease's
    ``error`` (None if it was released)."""

    def __init__(self, resource: str, token: int, reason: Optional[BaseException]) -> None:
        how = "was released" if reason is None else "has ended: %s" % (reason,)
        super().__init__("lease on %r (token %d) %s" % (resource, token, how))
        self.resource = resource
        self.token = token
        self.reason = reason


class SSEError(FenceError):
    """An event stream that cannot be read: a line or an event longer than
    the parser's limit, or an event whose data is not the JSON object the API
    describes. The only error :class:`fence.SSEParser` and
    :func:`fence.decode_event` raise."""


#: Every problem code of the v1 API and its exception class.
CODES: Dict[str, Type[FenceError]] = {
    "fenced": FencedError,
    "token_not_issued": TokenNotIssuedError,
    "lock_held": LockHeldError,
    "lease_lost": LeaseLostError,
    "rate_limited": RateLimitedError,
    "fence_required": FenceRequiredError,
    "invalid_token": InvalidTokenError,
    "invalid_sequencer": InvalidSequencerError,
    "precondition_failed": PreconditionFailedError,
    "not_found": NotFoundError,
    "bad_request": BadRequestError,
    "too_large": TooLargeError,
    "unauthorized": UnauthorizedError,
    "forbidden": ForbiddenError,
    "method_not_allowed": MethodNotAllowedError,
    "not_leader": NotLeaderError,
    "unavailable": UnavailableError,
    "not_ready": NotReadyError,
    "internal": InternalError,
}


def _snippet(body: bytes) -> str:
    return body[:256].decode("utf-8", "replace").strip()


def problem_error(status: int, body: bytes, headers: Optional[Mapping[str, str]] = None) -> FenceError:
    """Return the exception for an error answer: the class of the problem's
    ``code`` (:data:`CODES`), :class:`FenceError` itself for a code this
    client does not know or a body that is not a problem (a proxy's error
    page, say; its start is the ``detail``)."""
    headers = dict(headers or {})
    try:
        p = json.loads(body.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        p = None
    if not isinstance(p, dict) or not isinstance(p.get("code"), str) or not p.get("code"):
        return FenceError(status=status, code="", detail=_snippet(body) or "HTTP %d" % status, headers=headers)
    code = p["code"]
    cls = CODES.get(code, FenceError)
    detail = p.get("detail") if isinstance(p.get("detail"), str) else ""
    title = p.get("title") if isinstance(p.get("title"), str) else ""
    return cls(status=status, code=code, detail=detail, title=title, problem=p, headers=headers)


def is_ambiguous(exc: BaseException) -> bool:
    """Report whether ``exc`` leaves the outcome of a call unknown: the
    request may or may not have taken effect (a transport error or timeout
    once connected, or a 5xx other than ``not_leader``), as opposed to an
    answer from the server. A call whose every attempt certainly did nothing
    is not ambiguous: it could not connect, was answered ``not_leader``, or
    was refused by the client before sending."""
    if isinstance(exc, FenceError):
        if exc.maybe_applied:
            return True
        if isinstance(exc, TransportError):
            return exc.sent
        if exc.status is not None:
            return exc.status >= 500 and exc.code != "not_leader"
        return False
    return True


def is_lost(exc: BaseException) -> bool:
    """Report whether ``exc`` means the lease is gone (lost, expired, ended
    or fenced): the caller must stop working under it."""
    return isinstance(exc, (LeaseLostError, LeaseExpiredError, LeaseEndedError, FencedError))
