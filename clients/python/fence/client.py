"""The fence client: locks, fenced storage, listing, watching and the
operational endpoints of the v1 HTTP API."""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import secrets
import ssl
import threading
import time
import urllib.parse
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Union

from ._clock import ServerClock
from ._transport import Call, Request, Response, Transport
from .errors import BadRequestError, FenceError, ForbiddenError, LeaseLostError, NotFoundError
from .lease import Lease
from .sequencer import PublicKey
from .types import (
    ClusterStatus,
    Compare,
    Delete,
    Item,
    LeaseInfo,
    FenceInfo,
    FencePage,
    LockInfo,
    LockPage,
    LockStatus,
    Put,
    RevokeAsked,
    RevokeResult,
    SessionRef,
    Transferred,
    WriteResult,
    check_token,
    parse_time,
    session_resource,
)
from .watch import Watch

__all__ = ["Client", "new_holder_id", "DEFAULT_TTL", "DEFAULT_RETRY_FOR", "MAX_LIMIT"]

#: The default lease TTL, in seconds.
DEFAULT_TTL = 10.0
#: How long the client retries a call that is safe to repeat, in seconds:
#: longer than a leader failover takes.
DEFAULT_RETRY_FOR = 15.0
#: The most resources one multi-acquire (:meth:`Client.acquire_all`) takes.
MAX_MULTI = 100

#: The most permits a semaphore may have: an acquire's ``limit`` is in
#: 1..MAX_LIMIT.
MAX_LIMIT = 1000

Seconds = Union[float, int, _dt.timedelta]
Value = Union[bytes, bytearray, memoryview, str]


def new_holder_id() -> str:
    """A random holder id, unique with overwhelming probability."""
    return "h-" + secrets.token_hex(12)


def _seconds(v: Seconds, what: str) -> float:
    if isinstance(v, _dt.timedelta):
        return v.total_seconds()
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError("%s must be seconds (a number or a timedelta), not %r" % (what, v))
    return float(v)


def _limit(limit: Optional[int]) -> Optional[int]:
    """Check an acquire's ``limit``: None (a lock) or an int in 1..MAX_LIMIT
    (the permits of a semaphore)."""
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError("limit must be an int in 1..%d (the permits of a semaphore), not %r" % (MAX_LIMIT, limit))
    if not 1 <= limit <= MAX_LIMIT:
        raise ValueError("limit must be in 1..%d (the permits of a semaphore), not %d" % (MAX_LIMIT, limit))
    return limit


def _margin(ttl: float, safety_margin: Optional[Seconds]) -> float:
    """The safety margin of a lease of ``ttl`` seconds: ``safety_margin``, or
    a tenth of the TTL; ``ValueError`` outside [0, ttl)."""
    margin = ttl / 10 if safety_margin is None else _seconds(safety_margin, "safety_margin")
    if margin < 0 or margin >= ttl:
        raise ValueError("safety margin %gs must be in [0, ttl %gs)" % (margin, ttl))
    return margin


def _ms(seconds: float) -> int:
    return int(round(seconds * 1000))


def _pages(fetch: Callable[[str], Any]) -> Iterator[Any]:
    """The pages of a listing: fetch(after) from the first until one has no
    ``next``."""
    after = ""
    while True:
        page = fetch(after)
        yield page
        if not page.next:
            return
        after = page.next


def _page_path(path: str, prefix: str, after: str, limit: Optional[int]) -> str:
    """The path of a listing's page: path with its prefix, after and limit."""
    q: Dict[str, str] = {}
    if prefix:
        q["prefix"] = prefix
    if after:
        q["after"] = after
    if limit is not None:
        q["limit"] = str(limit)
    return path + ("?" + urllib.parse.urlencode(q) if q else "")


def _seg(s: str, what: str) -> str:
    if not isinstance(s, str) or s == "":
        raise ValueError("%s must be a non-empty str, not %r" % (what, s))
    return urllib.parse.quote(s, safe="")


def _key_path(key: str) -> str:
    if not isinstance(key, str) or key == "":
        raise ValueError("key must be a non-empty str, not %r" % (key,))
    return "/".join(urllib.parse.quote(p, safe="") for p in key.split("/"))


def _value(v: Value) -> bytes:
    if isinstance(v, str):
        return v.encode("utf-8")
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v)
    raise TypeError("value must be bytes or str, not %s" % type(v).__name__)


def _cond_headers(token: int, if_match: Union[int, str, None], if_none_match: bool) -> Dict[str, str]:
    h = {"Fencing-Token": str(check_token(token))}
    if if_match is not None and if_none_match:
        raise ValueError("if_match and if_none_match cannot be used together")
    if if_match is not None:
        if if_match == "*":
            h["If-Match"] = "*"
        elif isinstance(if_match, int) and not isinstance(if_match, bool) and if_match > 0:
            h["If-Match"] = '"%d"' % if_match
        else:
            raise ValueError('if_match must be a revision (an int >= 1) or "*", not %r' % (if_match,))
    if if_none_match:
        h["If-None-Match"] = "*"
    return h


class Client:
    """A client of a fence server, or of the servers of a cluster.

    ``addr`` is a base URL (``"http://127.0.0.1:7700"``) or several separated
    by commas (``"http://a:7700,http://b:7700"``). The client sends every call
    to its current address and stays there while that server answers; after
    a transport error or a 503 it moves on to the next address, round robin.

    Calls that are safe to repeat (reads, acquire by the same holder, renew,
    release, claim, and a put without a condition) are retried after a
    transport error or a 503 until they get another answer or ``retry_for``
    seconds have passed since the call began. The other calls (txn, a
    conditional put, delete, revoke) are resent only when the request
    certainly did not take effect: no connection could be made, or the server
    answered 503 ``not_leader``. After any other transport error or 503 their
    outcome is unknown and the error is raised: :func:`fence.is_ambiguous`
    tells. ``retries`` caps the resends (None: no cap; 0: none); ``backoff``
    is the first wait between two, doubled up to 1 s.

    ``timeout`` bounds each attempt (connect, and each read), in seconds; an
    acquire that waits adds its wait. ``auth_token`` is sent as
    ``Authorization: Bearer``. ``ssl_context`` verifies https servers (the
    system's CAs by default). Safe for use by several threads.

    By default the client keeps one server session for its leases
    (:meth:`acquire`, :meth:`acquire_all`, :meth:`lock`): it opens it at
    the first acquire and renews it alone, however many leases it holds;
    each lease is fenced on its own resource and ends with the session
    (:class:`fence.SessionEndedError`). A lease with another TTL than
    ``session_ttl`` (default ``DEFAULT_TTL``), a shared one, or every lease
    with ``session=False``, keeps itself alive. :meth:`close` ends the
    session. A server that refuses the session to the caller (no ``lock``
    on ``.session/``) gets leases of their own.
    """

    def __init__(
        self,
        addr: str,
        auth_token: Optional[str] = None,
        timeout: float = 10.0,
        *,
        retry_for: float = DEFAULT_RETRY_FOR,
        retries: Optional[int] = None,
        backoff: float = 0.05,
        ssl_context: Optional[ssl.SSLContext] = None,
        session: bool = True,
        session_ttl: Seconds = DEFAULT_TTL,
    ) -> None:
        self._use_session = bool(session)
        self._session_ttl = _seconds(session_ttl, "session_ttl")
        self._session_id = "client-" + new_holder_id()[2:]
        self._session_mu = threading.Lock()
        self._keep: Optional[Lease] = None
        self._clock = ServerClock()  # the leader's clock, for Fence-Deadline
        self._t = Transport(
            addr,
            auth_token=auth_token,
            timeout=float(timeout),
            retry_for=float(retry_for),
            retries=retries,
            backoff=float(backoff),
            ssl_context=ssl_context,
        )

    # -- addresses ----------------------------------------------------------

    @property
    def addrs(self) -> List[str]:
        """The servers' base URLs, in the order given."""
        return list(self._t.servers.addrs)

    @property
    def current(self) -> str:
        """The base URL of the server the client talks to now."""
        s = self._t.servers
        return s.addrs[s.current()]

    def __repr__(self) -> str:
        return "fence.Client(%r)" % ",".join(self._t.servers.addrs)

    # -- low level ----------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Optional[Union[bytes, str, Mapping[str, Any]]] = None,
        headers: Optional[Mapping[str, str]] = None,
        query: Optional[Mapping[str, str]] = None,
        retryable: Optional[bool] = None,
    ) -> Response:
        """Send one API request as it is, with the client's failover, retry
        and error rules, and return the 2xx answer (``.status``,
        ``.headers``, ``.body``, ``.json()``) or raise the problem's
        exception. A dict body is sent as JSON. ``retryable`` (default: GET
        and HEAD) says the request is safe to repeat. Nothing is checked
        before sending: this is the way to send what the other methods
        refuse, such as a malformed token."""
        if isinstance(body, Mapping):
            data: Optional[bytes] = json.dumps(body).encode("utf-8")
        elif isinstance(body, str):
            data = body.encode("utf-8")
        else:
            data = body
        if query:
            path += ("&" if "?" in path else "?") + urllib.parse.urlencode(query)
        if retryable is None:
            retryable = method.upper() in ("GET", "HEAD")
        return self._t.do(Request(method.upper(), path, body=data, headers=dict(headers or {}), retryable=retryable))

    def _json(self, req: Request, call: Optional[Call] = None, decode: Optional[Callable[[Any], Any]] = None) -> Any:
        """Send req and return its JSON answer, through decode if given; an
        answer that does not decode is a FenceError."""
        resp = self._t.do(req, call)
        try:
            d = resp.json()
            if not isinstance(d, dict):
                raise ValueError("not a JSON object")
            return decode(d) if decode is not None else d
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise FenceError("%s %s: unexpected answer %r: %s" % (req.method, req.path, resp.body[:200], e)) from None

    # -- locks --------------------------------------------------------------

    def acquire_raw(
        self,
        resource: str,
        holder: str,
        ttl: Optional[Seconds] = None,
        wait: Seconds = 0,
        *,
        limit: Optional[int] = None,
        session: Any = None,
        shared: bool = False,
    ) -> LeaseInfo:
        """Acquire ``resource`` for ``holder`` once, without keepalive: the
        answer of POST /v1/locks/{resource}/acquire. The lease runs out after
        ``ttl`` seconds unless renewed (:meth:`renew`). Waits up to ``wait``
        seconds if another holder has it, then raises
        :class:`fence.LockHeldError`. The same holder acquiring a lease it
        still holds gets the same token (so it is retried safely).

        With ``limit`` N (an int in 1..1000, checked before sending:
        ``TypeError`` / ``ValueError``) ``resource`` names a semaphore and
        this takes one of its N permits: the answer's ``resource`` is then
        the permit's slot, ``{resource}/permit-I-of-N``, which renew, release,
        transfer and fenced writes take. Another limit than the one the
        permits held now were taken with, or a slot's name acquired without
        a limit, is :class:`fence.BadRequestError`.

        With ``session`` (a :class:`fence.SessionRef`, or the lease on a
        session resource, ``fence.session_resource(NAME)``, e.g. a
        :class:`fence.Lease` that keeps it alive) the lease joins that
        session: its TTL is the session's (``ttl`` None, or the same), the
        session's renewals renew it (its own renew is
        :class:`fence.BadRequestError`), and it ends with the session. A
        session that is not open is :class:`fence.LeaseLostError`. ``ttl``
        None is ``DEFAULT_TTL`` outside a session.

        With ``shared`` the hold is shared (a read lock): beside any number
        of other shared holders and no exclusive one, with their group's
        token (the answer's ``shared`` is True); renew and release it with
        its ``holder``. An exclusive holder acquiring shared downgrades; a
        shared holder acquiring exclusively is
        :class:`fence.BadRequestError`. A shared hold takes no ``limit`` and
        no ``session``."""
        ref = SessionRef.of(session) if session is not None else None
        wait_s = _seconds(wait, "wait")
        b: Dict[str, Any] = {"holder": holder, "wait_ms": _ms(wait_s)}
        if ttl is not None or ref is None:
            b["ttl_ms"] = _ms(_seconds(DEFAULT_TTL if ttl is None else ttl, "ttl"))
        lim = _limit(limit)
        if lim is not None:
            b["limit"] = lim
        if ref is not None:
            b["session"] = {"resource": ref.resource, "token": ref.token}
        if shared:
            b["mode"] = "shared"
        body = json.dumps(b).encode()
        req = Request("POST", "/v1/locks/%s/acquire" % _seg(resource, "resource"), body=body, retryable=True, extra_timeout=max(0.0, wait_s))
        return self._json(req, decode=LeaseInfo.from_json)

    def acquire_all_raw(
        self,
        resources: Sequence[str],
        holder: str,
        ttl: Optional[Seconds] = None,
        wait: Seconds = 0,
        *,
        session: Any = None,
    ) -> List[LeaseInfo]:
        """Acquire every one of ``resources`` (1..100 distinct names) for
        ``holder`` at once, without keepalive: POST /v1/locks. One durable
        change grants them all, each with its own token, or none: a request
        refused (:class:`fence.LockHeldError`, naming a resource it could not
        get within ``wait``), timed out or failed holds none of them. Waiting
        never deadlocks with another multi-acquire. The leases come in the
        order of ``resources``; renew and release each as any lease.
        ``session`` joins them to a session, as :meth:`acquire_raw` does."""
        names = list(resources)
        if not names or len(names) > MAX_MULTI:
            raise ValueError("resources must have 1..%d names, not %d" % (MAX_MULTI, len(names)))
        if len(set(names)) != len(names):
            raise ValueError("resources must be distinct: %r" % (names,))
        ref = SessionRef.of(session) if session is not None else None
        wait_s = _seconds(wait, "wait")
        b: Dict[str, Any] = {"resources": names, "holder": holder, "wait_ms": _ms(wait_s)}
        if ttl is not None or ref is None:
            b["ttl_ms"] = _ms(_seconds(DEFAULT_TTL if ttl is None else ttl, "ttl"))
        if ref is not None:
            b["session"] = {"resource": ref.resource, "token": ref.token}
        req = Request("POST", "/v1/locks", body=json.dumps(b).encode(), retryable=True, extra_timeout=max(0.0, wait_s))
        return self._json(req, decode=lambda d: [LeaseInfo.from_json(x) for x in d["leases"]])

    def acquire_all(
        self,
        resources: Sequence[str],
        ttl: Seconds = DEFAULT_TTL,
        wait: Seconds = 0,
        *,
        holder: Optional[str] = None,
        safety_margin: Optional[Seconds] = None,
    ) -> List[Lease]:
        """Acquire every one of ``resources`` at once, all or none (see
        :meth:`acquire_all_raw`), and return a :class:`fence.Lease` per
        resource, in their order, each renewing itself as :meth:`acquire`'s
        does."""
        ttl_s = _seconds(ttl, "ttl")
        margin = _margin(ttl_s, safety_margin)
        holder = holder or new_holder_id()
        keep = self._session_for(ttl_s, False)
        if keep is not None:
            infos = self.acquire_all_raw(resources, holder, None, wait, session=keep)
            leases = [Lease(self, info, keep.safety_margin, time.monotonic(), keeper=keep) for info in infos]
            for lease in leases:
                lease._start()
            return leases
        sent = time.monotonic()
        infos = self.acquire_all_raw(resources, holder, ttl_s, wait)
        leases = [Lease(self, info, margin, sent) for info in infos]
        if time.monotonic() - sent > margin:
            # As in acquire: count from a renewal of each instead.
            for lease in leases:
                try:
                    lease._renew_once(time.monotonic() + lease.ttl - margin)
                except FenceError as e:
                    for other in leases:
                        other._end(e, lost=True)
                        with contextlib.suppress(FenceError):
                            self.release(other.resource, other.token)
                    raise
        for lease in leases:
            lease._start()
        return leases

    def _session_for(self, ttl: float, shared: bool) -> Optional[Lease]:
        """The client's session, opened now if none is open, for a lease of
        ttl; None if the lease keeps itself alive: the client has no
        sessions, the lease is shared or has another TTL, or the server
        refuses the session."""
        if not self._use_session or shared or ttl != self._session_ttl:
            return None
        with self._session_mu:
            if self._keep is not None and not self._keep.done.is_set():
                return self._keep
            try:
                self._keep = self.acquire(session_resource(self._session_id), self._session_ttl, holder=self._session_id, shared=False, _own=True)
            except (ForbiddenError, NotFoundError, BadRequestError):
                self._use_session = False
                return None
            return self._keep

    @property
    def session(self) -> Optional[Lease]:
        """The client's session, None if none is open."""
        with self._session_mu:
            keep = self._keep
        return keep if keep is not None and not keep.done.is_set() else None

    def close(self) -> None:
        """Release the client's session, if one is open, and with it every
        lease in it; the leases of their own stay. The next acquire opens
        another session."""
        with self._session_mu:
            keep, self._keep = self._keep, None
        if keep is not None:
            keep.release()

    def renew(
        self, resource: str, token: int, ttl: Optional[Seconds] = None, *, holder: Optional[str] = None, _call: Optional[Call] = None
    ) -> LeaseInfo:
        """Renew the lease ``token`` of ``resource`` for ``ttl`` seconds (None:
        its current TTL). Raises :class:`fence.LeaseLostError` if it is not the
        current, unexpired lease. ``holder`` names the lease's holder:
        required for a shared hold, whose token is its group's."""
        b: Dict[str, Any] = {"token": check_token(token)}
        if ttl is not None:
            b["ttl_ms"] = _ms(_seconds(ttl, "ttl"))
        if holder is not None:
            b["holder"] = holder
        path, body = "/v1/locks/%s/renew" % _seg(resource, "resource"), json.dumps(b).encode()
        # A lease's keepalive gives each renewal a deadline: sent on the
        # server's clock (Fence-Deadline) once the client knows that clock,
        # so that a server that reads it after the keepalive gave up (it
        # was paused, say) applies nothing, instead of holding the lease
        # for a TTL nobody renews. A refusal of a deadline not reached yet
        # means the estimate is wrong (another server leads): the renewal
        # goes again without one.
        headers: Dict[str, str] = {}
        if _call is not None and _call.deadline is not None:
            deadline = self._clock.to_server(time.time() + (_call.deadline - time.monotonic()))
            if deadline is not None:
                headers["Fence-Deadline"] = deadline
        sent, start = time.time(), time.monotonic()
        try:
            info = self._json(Request("POST", path, body=body, headers=headers, retryable=True), _call, LeaseInfo.from_json)
        except BadRequestError:
            if not headers or (_call is not None and _call.over()):
                raise
            self._clock.forget()
            sent, start = time.time(), time.monotonic()
            info = self._json(Request("POST", path, body=body, retryable=True), _call, LeaseInfo.from_json)
        self._clock.learn(sent, time.monotonic() - start, info)
        return info

    def release(self, resource: str, token: int, *, holder: Optional[str] = None) -> None:
        """Release the lease ``token`` of ``resource``. Raises
        :class:`fence.LeaseLostError` if it is not the current lease (a stale
        token never releases a newer holder's lease). ``holder`` names the
        lease's holder: required for a shared hold."""
        b: Dict[str, Any] = {"token": check_token(token)}
        if holder is not None:
            b["holder"] = holder
        body = json.dumps(b).encode()
        self._t.do(Request("POST", "/v1/locks/%s/release" % _seg(resource, "resource"), body=body, retryable=True))

    def acquire(
        self,
        resource: str,
        ttl: Seconds = DEFAULT_TTL,
        wait: Seconds = 0,
        *,
        holder: Optional[str] = None,
        safety_margin: Optional[Seconds] = None,
        limit: Optional[int] = None,
        shared: bool = False,
        _own: bool = False,
    ) -> Lease:
        """Acquire ``resource`` and return a :class:`fence.Lease` that renews
        itself in a background thread (about every ttl/3) until released or
        lost. It declares itself lost by its own monotonic clock when no
        renewal has succeeded by ``ttl - safety_margin`` (default ttl/10)
        after the last successful renewal was sent. ``wait`` is how long to
        wait for the lock (default: fail at once with
        :class:`fence.LockHeldError`); ``holder`` defaults to a random id.

        With ``limit`` N (1..1000) the lease holds one of the N permits of
        the semaphore ``resource`` (see :meth:`acquire_raw`): its
        ``resource`` is the permit's slot, which its renewals, release,
        transfer and writes use. With ``shared`` it is a shared hold (see
        :meth:`acquire_raw`), renewed and released with its holder."""
        _limit(limit)
        ttl_s = _seconds(ttl, "ttl")
        margin = _margin(ttl_s, safety_margin)
        holder = holder or new_holder_id()
        keep = None if _own else self._session_for(ttl_s, shared)
        if keep is not None:
            try:
                info = self.acquire_raw(resource, holder, None, wait, limit=limit, session=keep)
            except LeaseLostError as e:
                if e.problem.get("resource") != keep.resource:
                    raise
                keep = self._session_for(ttl_s, shared)  # the session ended meanwhile: open another
                info = self.acquire_raw(resource, holder, None, wait, limit=limit, session=keep)
            lease = Lease(self, info, keep.safety_margin, time.monotonic(), keeper=keep)
            lease._start()
            return lease
        sent = time.monotonic()
        info = self.acquire_raw(resource, holder, ttl_s, wait, limit=limit, shared=shared)
        lease = Lease(self, info, margin, sent)
        if time.monotonic() - sent > margin:
            # The grant happened at some unknown moment during a long acquire
            # (a wait, a slow network): count from a renewal instead.
            try:
                lease._renew_once(time.monotonic() + info.ttl - margin)
            except FenceError as e:
                lease._end(e, lost=True)
                with contextlib.suppress(FenceError):
                    self.release(info.resource, info.token, holder=info.holder)  # best effort: else it expires
                raise
        lease._start()
        return lease

    @contextlib.contextmanager
    def lock(
        self,
        resource: str,
        ttl: Seconds = DEFAULT_TTL,
        wait: Seconds = 0,
        *,
        holder: Optional[str] = None,
        safety_margin: Optional[Seconds] = None,
        limit: Optional[int] = None,
        shared: bool = False,
    ) -> Iterator[Lease]:
        """Run a block under a lease and release it after::

            with client.lock("orders", ttl=10, wait=5) as lease:
                lease.put("total", b"42")

        It acquires as :meth:`acquire` does (``limit``: one permit of a
        semaphore; ``shared``: a shared hold). On leaving the block it releases
        the lease. If the block raised, that exception propagates (a failed
        release is then ignored); else, if the lease was lost while the block
        ran, its :class:`fence.LeaseLostError` or
        :class:`fence.LeaseExpiredError` is raised, so that the caller knows
        some writes may have been fenced; else a failed release's error."""
        lease = self.acquire(resource, ttl, wait, holder=holder, safety_margin=safety_margin, limit=limit, shared=shared)
        try:
            yield lease
        except BaseException:
            with contextlib.suppress(FenceError):
                lease.release()
            raise
        lost = lease.error if lease.lost.is_set() else None
        rel: Optional[FenceError] = None
        try:
            lease.release()
        except FenceError as e:
            rel = e
        if lost is not None:
            raise lost
        if rel is not None:
            raise rel

    def status(self, resource: str) -> LockStatus:
        """The lock's status (GET /v1/locks/{resource})."""
        return self._json(Request("GET", "/v1/locks/%s" % _seg(resource, "resource"), retryable=True), decode=LockStatus.from_json)

    def transfer(self, resource: str, token: int, to: Optional[str] = None) -> Transferred:
        """Hand the lease ``token`` of ``resource`` to the first waiter whose
        holder is ``to`` (None: the first waiter) in one change: the
        successor's token is greater and fences this one at once. Raises
        :class:`fence.NotFoundError` if nobody of that name waits (nothing
        changes), :class:`fence.LeaseLostError` if ``token`` does not hold the
        lease. Sent once: resent after it took effect it would be lease_lost,
        so a transport error leaves the outcome unknown."""
        b: Dict[str, Any] = {"token": check_token(token)}
        if to:
            b["to"] = to
        req = Request("POST", "/v1/locks/%s/transfer" % _seg(resource, "resource"), body=json.dumps(b).encode())
        return self._json(req, decode=Transferred.from_json)

    def revoke(self, resource: str) -> RevokeResult:
        """End the current lease of ``resource``, if any, and raise its fence to
        a new token issued to nobody, so that the old holder is fenced at once
        (an admin action). Sent once: a repeated revoke would issue another
        token, so a transport error leaves the outcome unknown."""
        return self._json(
            Request("POST", "/v1/locks/%s/revoke" % _seg(resource, "resource"), body=b"{}"),
            decode=lambda d: RevokeResult(resource=d["resource"], revoked_token=d.get("revoked_token", 0), last_fence=d["last_fence"]),
        )

    def ask_to_release(self, resource: str, grace: Seconds) -> Optional[RevokeAsked]:
        """Ask the holder of ``resource`` to let go within ``grace`` seconds
        (cooperative revocation; an admin action): the server records the
        request, tells the holder (``revoke_at`` on its renewals, a
        ``revoke_requested`` watch event) and revokes the lease at the
        deadline if it still holds. Returns the lease asked, or None if the
        resource was free (it is then revoked at once). Sent once, as
        :meth:`revoke` is."""
        b = {"grace_ms": _ms(_seconds(grace, "grace"))}
        req = Request("POST", "/v1/locks/%s/revoke" % _seg(resource, "resource"), body=json.dumps(b).encode())
        d = self._json(req)
        if "revoke_at" not in d:
            return None
        return RevokeAsked(resource=d["resource"], token=d["token"], revoke_at=parse_time(d["revoke_at"]),
                           holder=d.get("holder"), shared=d.get("mode") == "shared")

    def list_locks(self, prefix: str = "", after: str = "", limit: Optional[int] = None) -> LockPage:
        """One page of the locks held now whose resource starts with
        ``prefix``, after ``after`` in byte order, at most ``limit`` (1..1000,
        default the server's 100). ``page.next`` is the ``after`` of the next
        page, None on the last."""
        return self._json(
            Request("GET", _page_path("/v1/locks", prefix, after, limit), retryable=True),
            decode=lambda d: LockPage(locks=[LockInfo.from_json(x) for x in d.get("locks") or []], next=d.get("next") or None),
        )

    def locks(self, prefix: str = "", page_size: Optional[int] = None) -> Iterator[LockInfo]:
        """Iterate over every lock held whose resource starts with ``prefix``,
        fetching page after page (``page_size`` each) as it goes."""
        for page in _pages(lambda after: self.list_locks(prefix, after, page_size)):
            yield from page.locks

    def list_fences(self, prefix: str = "", after: str = "", limit: Optional[int] = None) -> FencePage:
        """One page of the resources for which a token was issued or a fence
        raised, held now or not, with their last token and last fence
        (GET /v1/fences): those whose name starts with ``prefix``, after
        ``after`` in byte order, at most ``limit`` (1..1000, default the
        server's 100). ``page.next`` is the ``after`` of the next page, None
        on the last."""
        return self._json(
            Request("GET", _page_path("/v1/fences", prefix, after, limit), retryable=True),
            decode=lambda d: FencePage(fences=[FenceInfo.from_json(x) for x in d.get("fences") or []], next=d.get("next") or None),
        )

    def fences(self, prefix: str = "", page_size: Optional[int] = None) -> Iterator[FenceInfo]:
        """Iterate over every resource's last token and last fence under
        ``prefix``, fetching page after page (``page_size`` each)."""
        for page in _pages(lambda after: self.list_fences(prefix, after, page_size)):
            yield from page.fences

    # -- storage ------------------------------------------------------------

    def put(
        self,
        resource: str,
        key: str,
        value: Value,
        token: int,
        *,
        if_match: Union[int, str, None] = None,
        if_none_match: bool = False,
        sequencer: Optional[str] = None,
    ) -> WriteResult:
        """Store ``value`` under ``resource``/``key`` with the fencing
        ``token``: accepted iff last_fence <= token <= the highest token
        issued, else :class:`fence.FencedError` /
        :class:`fence.TokenNotIssuedError`. ``if_match`` (a revision, or
        ``"*"``: the key exists) and ``if_none_match`` (the key is absent) are
        the conditions; one that fails is
        :class:`fence.PreconditionFailedError`. ``sequencer`` is sent as
        Fence-Sequencer. A put without a condition is retried safely; a
        conditional one is not."""
        h = _cond_headers(token, if_match, if_none_match)
        h["Content-Type"] = "application/octet-stream"
        if sequencer:
            h["Fence-Sequencer"] = sequencer
        req = Request(
            "PUT",
            "/v1/kv/%s/%s" % (_seg(resource, "resource"), _key_path(key)),
            body=_value(value),
            headers=h,
            retryable=if_match is None and not if_none_match,
        )
        return self._json(req, decode=lambda d: WriteResult(resource=d["resource"], key=d["key"], revision=d["revision"], fence=d["fence"]))

    def get(self, resource: str, key: str) -> Item:
        """The value stored under ``resource``/``key``, its revision and the
        token of the write that stored it; :class:`fence.NotFoundError` if
        none."""
        path = "/v1/kv/%s/%s" % (_seg(resource, "resource"), _key_path(key))
        resp = self._t.do(Request("GET", path, retryable=True))
        etag = resp.headers.get("etag", "").strip('"')
        tok = resp.headers.get("fencing-token", "")
        if not etag.isdigit() or not tok.isdigit():
            raise FenceError("GET %s: ETag %r or Fencing-Token %r is not a number" % (path, etag, tok))
        return Item(resource=resource, key=key, value=resp.body, revision=int(etag), token=int(tok))

    def delete(
        self,
        resource: str,
        key: str,
        token: int,
        *,
        if_match: Union[int, str, None] = None,
        sequencer: Optional[str] = None,
    ) -> WriteResult:
        """Delete ``resource``/``key`` with the fencing ``token``;
        :class:`fence.NotFoundError` if it does not exist. Not retried after an
        unknown outcome (a repeat would answer not_found)."""
        h = _cond_headers(token, if_match, False)
        if sequencer:
            h["Fence-Sequencer"] = sequencer
        path = "/v1/kv/%s/%s" % (_seg(resource, "resource"), _key_path(key))
        return self._json(
            Request("DELETE", path, headers=h),
            decode=lambda d: WriteResult(resource=d["resource"], key=d["key"], revision=d["revision"], fence=token),
        )

    def fence(self, resource: str) -> int:
        """The resource's last fence (0 for an unknown resource)."""
        return self._json(Request("GET", "/v1/fences/%s" % _seg(resource, "resource"), retryable=True), decode=lambda d: d["last_fence"])

    def claim(self, resource: str, token: int, *, sequencer: Optional[str] = None) -> int:
        """Raise the resource's fence to ``token`` without writing (a holder
        claims the resource, so that any older holder is rejected from now
        on), and return the last fence."""
        h = _cond_headers(token, None, False)
        if sequencer:
            h["Fence-Sequencer"] = sequencer
        req = Request("POST", "/v1/fences/%s" % _seg(resource, "resource"), headers=h, retryable=True)
        return self._json(req, decode=lambda d: d["last_fence"])

    def txn(
        self,
        fences: Mapping[str, int],
        compares: Iterable[Union[Compare, Mapping[str, Any]]] = (),
        ops: Iterable[Union[Put, Delete, Mapping[str, Any]]] = (),
        *,
        sequencer: Optional[str] = None,
    ) -> int:
        """Apply ``ops`` (:class:`fence.Put`, :class:`fence.Delete`) all or
        nothing if every compare (:class:`fence.Compare`) holds and every
        fence of ``fences`` (resource -> token) passes; return the new
        revision. Every entry of ``fences`` is raised when the txn applies.
        Sent once unless it certainly did not take effect."""
        body = {
            "fences": {r: check_token(t, "fences[%r]" % r) for r, t in fences.items()},
            "if": [c.to_json() if isinstance(c, Compare) else dict(c) for c in compares],
            "then": [o.to_json() if isinstance(o, (Put, Delete)) else dict(o) for o in ops],
        }
        h = {"Fence-Sequencer": sequencer} if sequencer else {}
        return self._json(Request("POST", "/v1/txn", body=json.dumps(body).encode(), headers=h), decode=lambda d: d["revision"])

    # -- operations ---------------------------------------------------------

    def cluster(self) -> ClusterStatus:
        """What the current server knows of its cluster (GET /v1/cluster)."""
        return self._json(Request("GET", "/v1/cluster", retryable=True), decode=ClusterStatus.from_json)

    def keys(self) -> List[PublicKey]:
        """The public keys that verify the server's sequencers (GET
        /v1/keys); empty if it signs nothing."""
        return self._json(Request("GET", "/v1/keys", retryable=True), decode=lambda d: [PublicKey.from_jwk(k) for k in d.get("keys") or []])

    def ready(self) -> bool:
        """True if the current server would serve a request now (GET
        /readyz); raises :class:`fence.NotReadyError` (through the retries)
        if not."""
        self._t.do(Request("GET", "/readyz", retryable=True))
        return True

    def watch(
        self,
        prefix: str = "",
        last_event_id: Optional[str] = None,
        *,
        reconnect_delay: Optional[float] = None,
        max_reconnect_delay: float = 10.0,
        idle_timeout: float = 35.0,
    ) -> Watch:
        """Open GET /v1/watch: an iterator of :class:`fence.Event` for every
        change to a lock and every fenced write of the resources that start
        with ``prefix``. It connects before returning (so it sees every event
        made after the call) and reconnects by itself with Last-Event-ID; a
        ``lost`` event says the server could not resume (list the locks
        again). ``last_event_id`` resumes from an earlier watch's
        ``last_event_id``. Close it with ``close()`` or a ``with`` block.
        ``idle_timeout`` is how long a silent stream (the server sends a
        heartbeat every 15 s) counts as alive."""
        return Watch(
            self._t,
            prefix,
            last_event_id,
            reconnect_delay=reconnect_delay,
            max_reconnect_delay=max_reconnect_delay,
            idle_timeout=idle_timeout,
        )

