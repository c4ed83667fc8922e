"""A lease that keeps itself alive, and whose writes carry its token."""

from __future__ import annotations

import datetime as _dt
import threading
import time
import urllib.request
from typing import TYPE_CHECKING, Any, Collection, Iterable, List, Mapping, MutableMapping, Optional, Tuple, Union

from ._transport import Call
from .errors import (
    BadRequestError,
    FenceError,
    ForbiddenError,
    InvalidTokenError,
    LeaseEndedError,
    LeaseExpiredError,
    LeaseLostError,
    NotFoundError,
    RateLimitedError,
    SessionEndedError,
)
from .types import AskedLease, Compare, Delete, Item, LeaseInfo, Put, Transferred, WriteResult

if TYPE_CHECKING:  # pragma: no cover
    from .client import Client

__all__ = ["Lease", "StampingHandler", "MUTATING_METHODS"]

#: The methods the stamping adapter stamps by default, as the Go client's
#: Transport does.
MUTATING_METHODS = frozenset(["POST", "PUT", "PATCH", "DELETE"])


class Lease:
    """A held lock that renews itself in a background thread. Made by
    :meth:`fence.Client.acquire` and :meth:`fence.Client.lock`.

    The rules, as the Go ``fence.Session`` has them:

    * it renews about every ``ttl/3``; a failed renewal is retried every
      ``ttl/20`` (the client's own retries run inside each);
    * it declares itself lost by its own ``time.monotonic()`` clock when no
      renewal has succeeded by its ``deadline``: ``ttl - safety_margin``
      counted from when the last successful renewal request (or the acquire)
      was *sent*, without waiting for the server, which may be unreachable;
    * a ``lease_lost`` answer ends it at once;
    * it never re-acquires.

    ``lost`` is set when the lease was lost (``error`` is then a
    :class:`fence.LeaseLostError` or :class:`fence.LeaseExpiredError`);
    ``done`` when it ended in any way, release included (``error`` stays
    None after a clean release, and holds the release's error after a failed
    one). Writes through an ended lease are refused with
    :class:`fence.LeaseEndedError` without being sent.
    """

    def __init__(self, client: "Client", info: LeaseInfo, margin: float, sent: float, keeper: Optional["Lease"] = None) -> None:
        self._client = client
        #: The lease on the session resource that keeps this lease alive,
        #: None for a lease that renews itself: a lease in a session sends no
        #: renewal, and ends when its session does.
        self.keeper = keeper
        self._followers: List["Lease"] = []
        #: The locked resource, as the grant names it: for a permit of a
        #: semaphore (``limit``), its slot ``{semaphore}/permit-I-of-N``.
        self.resource = info.resource
        #: The holder id the lease was granted to.
        self.holder = info.holder
        #: The fencing token: send it with every write.
        self.token = info.token
        #: The lease's time to live, in seconds.
        self.ttl = info.ttl
        #: The signed sequencer of the grant, None if the server signs nothing.
        self.sequencer = info.sequencer
        #: True for a shared hold: ``token`` is its group's.
        self.shared = info.shared
        #: Set once the server says that a caller asked the holder to let go
        #: (:meth:`fence.Client.ask_to_release`): release before
        #: :attr:`revoke_at`, when the server revokes the lease. The lease
        #: learns it from a renewal, within about ttl/3 (a lease in a session,
        #: from its session's).
        self.revoke_requested = threading.Event()
        self._revoke_at = info.revoke_at
        # In a session: its keeper's renewals listed it as asked to let go.
        self._listed = False
        if info.revoke_at is not None:
            self.revoke_requested.set()
        #: Set when the lease was lost (by the server's word or the local clock).
        self.lost = threading.Event()
        #: Set when the lease ended: lost, expired or released.
        self.done = threading.Event()
        #: Why the lease ended, None while held and after a clean release.
        self.error: Optional[FenceError] = None
        self.safety_margin = margin
        self._mu = threading.Lock()
        self._expires_at = info.expires_at
        self._deadline = sent + info.ttl - margin
        self._stop = threading.Event()
        self._call: Optional[Call] = None
        self._thread = self._new_keepalive()
        self._release_mu = threading.Lock()

    def __repr__(self) -> str:
        state = "held" if not self.done.is_set() else ("lost" if self.lost.is_set() else "ended")
        return "<fence.Lease %r token=%d holder=%r %s>" % (self.resource, self.token, self.holder, state)

    # -- state --------------------------------------------------------------

    @property
    def deadline(self) -> float:
        """The local deadline on the ``time.monotonic()`` clock: the lease is
        surely held before it, unless the server said otherwise. A lease in a
        session has its session's."""
        if self.keeper is not None:
            return self.keeper.deadline
        with self._mu:
            return self._deadline

    @property
    def expires_at(self) -> _dt.datetime:
        """When the lease expires by the server's clock, as it last said."""
        with self._mu:
            return self._expires_at

    @property
    def revoke_at(self) -> Optional[_dt.datetime]:
        """When the server revokes the lease, as it last said; None if nobody
        asked the holder to let go."""
        with self._mu:
            return self._revoke_at

    @property
    def held(self) -> bool:
        """True while the lease has not ended (it may still be past its
        deadline until the keepalive notices; :meth:`check` is exact)."""
        return not self.done.is_set()

    def check(self) -> None:
        """Raise :class:`fence.LeaseEndedError` if the lease has ended or its
        local deadline has passed (declaring it lost then)."""
        if not self.done.is_set() and time.monotonic() >= self.deadline:
            self._end(LeaseExpiredError(self.resource, self.token, None), lost=True)
        if self.done.is_set() or self._stop.is_set():
            raise LeaseEndedError(self.resource, self.token, self.error)

    def _end(self, error: Optional[FenceError], lost: bool) -> None:
        with self._mu:
            if self.done.is_set():
                return
            self.error = error
            if lost:
                self.lost.set()
            self.done.set()
        self._end_followers()

    def _follow(self, follower: "Lease") -> None:
        """Make follower, a lease in this session, end when it ends."""
        with self._mu:
            if not self.done.is_set():
                self._followers.append(follower)
                return
        follower._session_ended(self)

    def _end_followers(self) -> None:
        with self._mu:
            followers, self._followers = self._followers, []
        for f in followers:
            f._session_ended(self)

    def _session_ended(self, keeper: "Lease") -> None:
        self._end(SessionEndedError(self.resource, self.token, keeper.resource, keeper.error), lost=True)

    # -- keepalive ----------------------------------------------------------

    def _start(self) -> None:
        if self.keeper is not None:
            self.keeper._follow(self)  # renewed by its session: no thread
            return
        self._thread.start()

    def _renew_once(self, until: float) -> None:
        """Renew once, giving up at ``until`` (monotonic); on success move the
        local deadline."""
        sent = time.monotonic()
        call = Call(until)
        self._call = call
        if self._stop.is_set():
            call.cancel()
        info = self._client.renew(self.resource, self.token, self.ttl, holder=self.holder if self.shared else None, _call=call)
        with self._mu:
            self._expires_at = info.expires_at
            self._deadline = sent + self.ttl - self.safety_margin
            if info.revoke_at is not None:
                self._revoke_at = info.revoke_at
        if info.revoke_at is not None:
            self.revoke_requested.set()
        self._note_asked(info.asked)

    def _note_asked(self, asked: Tuple[AskedLease, ...]) -> None:
        """A renewal of this lease, a session's: tell the leases in the
        session that a caller asked them to let go, and end those that were
        listed and are no longer (revoked at the deadline); forget the
        followers that have ended."""
        listed = {(a.resource, a.token): a.revoke_at for a in asked}
        with self._mu:
            self._followers = [f for f in self._followers if not f.done.is_set()]
            followers = list(self._followers)
        for f in followers:
            f._asked(listed.get((f.resource, f.token)))

    def _asked(self, revoke_at: Optional[_dt.datetime]) -> None:
        """What its session's last renewal says of this lease, in it: asked
        to let go by revoke_at, or not (None)."""
        if self._stop.is_set() or self.done.is_set():
            return  # being released, or ended
        if revoke_at is not None:
            with self._mu:
                self._revoke_at, self._listed = revoke_at, True
            self.revoke_requested.set()
        elif self._listed:
            problem = {"code": "lease_lost", "resource": self.resource, "presented": self.token, "current": 0}
            self._end(LeaseLostError("lease on %r (token %d) was revoked at the deadline of a request to let go" % (self.resource, self.token), problem=problem), lost=True)

    def _keepalive(self) -> None:
        interval = self.ttl / 3
        retry = max(self.ttl / 20, 0.001)
        next_at = time.monotonic() + interval
        last_err: Optional[BaseException] = None
        while True:
            wake = min(next_at, self.deadline)
            if self._stop.wait(max(0.0, wake - time.monotonic())):
                return
            now = time.monotonic()
            if now >= self.deadline:
                # Also after this process was frozen: whichever timer fired,
                # the deadline decides.
                self._end(LeaseExpiredError(self.resource, self.token, last_err), lost=True)
                return
            if now < next_at:
                continue
            try:
                self._renew_once(self.deadline)
            except LeaseLostError as e:
                if self._stop.is_set():
                    return
                self._end(e, lost=True)
                return
            except Exception as e:  # noqa: BLE001 - any failure is retried until the deadline
                if self._stop.is_set():
                    return
                last_err = e
                next_at = time.monotonic() + retry
                continue
            if self._stop.is_set():
                return
            last_err = None
            next_at = time.monotonic() + interval

    def _new_keepalive(self) -> threading.Thread:
        """A keepalive thread, not started."""
        return threading.Thread(target=self._keepalive, name="fence-lease-%s" % self.resource, daemon=True)

    def _finish(self, error: Optional[FenceError]) -> None:
        """End the lease here: released (error None), or no longer renewed
        after error, whose outcome is unknown."""
        with self._mu:
            self.error = error
            self.done.set()
        self._end_followers()

    def _stop_renewals(self) -> bool:
        """Stop the keepalive (a renewal in flight gives up at once), with
        _release_mu held, and report whether the lease has ended already."""
        self._stop.set()
        call = self._call
        if call is not None:
            call.cancel()
        if self._thread.is_alive() and self._thread is not threading.current_thread():  # none in a session
            self._thread.join()
        return self.done.is_set() and self.error is None or self.lost.is_set()

    def release(self) -> None:
        """Stop the renewals and release the lease. Returns once the lease is
        no longer held: released now, or ended before. Raises the release's
        error when its outcome is unknown (the lease then expires by its
        TTL); calling it again resends the release."""
        with self._release_mu:
            if self._stop_renewals():
                return
            try:
                self._client.release(self.resource, self.token, holder=self.holder if self.shared else None)
            except LeaseLostError:
                pass
            except FenceError as e:
                if self.keeper is not None:
                    # Perhaps still held, and kept by its session: it goes
                    # on until the session ends, and release may be retried.
                    self._stop.clear()
                    raise
                self._finish(e)
                raise
            self._finish(None)

    def transfer(self, to: Optional[str] = None) -> Transferred:
        """Stop the renewals and hand the lease to the first waiter whose
        holder is ``to`` (None: the first waiter) in one change, and return the
        successor's lease: its token is greater, so what this holder still
        writes is fenced. The lease then ends as after a release. If nobody
        of that name waits it raises :class:`fence.NotFoundError` (or the
        request's refusal: bad, forbidden, rate limited): nothing changed,
        and the lease goes on, renewed. After any other failure,
        whose outcome is unknown, it raises and the lease is no longer
        renewed, as after a failed release: release it, or it expires by its
        TTL."""
        with self._release_mu:
            if self._stop_renewals():
                raise LeaseEndedError(self.resource, self.token, self.error)
            try:
                succ = self._client.transfer(self.resource, self.token, to)
            except LeaseLostError as e:
                self._end(e, lost=True)
                raise
            except (NotFoundError, BadRequestError, InvalidTokenError, ForbiddenError, RateLimitedError) as e:
                # Certainly nothing changed (nobody of that name waits, or
                # the request was refused): renew again, unless the lease
                # already ended here after an earlier failure.
                if not self.done.is_set():
                    self._stop.clear()
                    self._thread = self._new_keepalive()
                    self._thread.start()
                raise e
            except FenceError as e:
                self._finish(e)
                raise
            self._finish(None)
            return succ

    def __enter__(self) -> "Lease":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()

    # -- storage through the lease -----------------------------------------

    def put(
        self,
        key: str,
        value: Union[bytes, str],
        *,
        if_match: Union[int, str, None] = None,
        if_none_match: bool = False,
    ) -> WriteResult:
        """Store ``value`` under ``key`` in the lease's resource, with its
        token and sequencer (see :meth:`fence.Client.put`)."""
        self.check()
        return self._client.put(
            self.resource, key, value, self.token, if_match=if_match, if_none_match=if_none_match, sequencer=self.sequencer
        )

    def compare_and_swap(self, key: str, value: Union[bytes, str], revision: int) -> WriteResult:
        """Store ``value`` only if ``key`` is at ``revision`` (0: only if it does
        not exist); else :class:`fence.PreconditionFailedError`."""
        if revision == 0:
            return self.put(key, value, if_none_match=True)
        return self.put(key, value, if_match=revision)

    def get(self, key: str) -> Item:
        """Read ``key`` of the lease's resource."""
        return self._client.get(self.resource, key)

    def delete(self, key: str, *, if_match: Union[int, str, None] = None) -> WriteResult:
        """Delete ``key`` of the lease's resource, with its token."""
        self.check()
        return self._client.delete(self.resource, key, self.token, if_match=if_match, sequencer=self.sequencer)

    def claim(self) -> int:
        """Raise the resource's fence to the lease's token without writing, so
        that any older holder is rejected from now on; return the fence."""
        self.check()
        return self._client.claim(self.resource, self.token, sequencer=self.sequencer)

    def fence(self) -> int:
        """The resource's last fence."""
        return self._client.fence(self.resource)

    def txn(
        self,
        compares: Iterable[Union[Compare, Mapping[str, Any]]] = (),
        ops: Iterable[Union[Put, Delete, Mapping[str, Any]]] = (),
        fences: Optional[Mapping[str, int]] = None,
    ) -> int:
        """Apply a txn with the lease's token as the fence of its resource;
        ``fences`` of other resources (from other leases) are added as
        given."""
        self.check()
        f = dict(fences or {})
        f[self.resource] = self.token
        return self._client.txn(f, compares, ops, sequencer=self.sequencer)

    # -- stamping other services' requests ----------------------------------

    def stamp(self, headers: Optional[MutableMapping[str, str]] = None) -> MutableMapping[str, str]:
        """Add ``Fencing-Token`` (and ``Fence-Sequencer`` when the lease has
        one) to ``headers`` (a new dict if None) and return it, for a write to
        any service that checks fencing tokens. Raises
        :class:`fence.LeaseEndedError` once the lease has ended."""
        self.check()
        if headers is None:
            headers = {}
        headers["Fencing-Token"] = str(self.token)
        if self.sequencer:
            headers["Fence-Sequencer"] = self.sequencer
        return headers

    def handler(self, methods: Optional[Collection[str]] = MUTATING_METHODS) -> "StampingHandler":
        """A ``urllib.request`` handler that stamps the lease's token on the
        requests of ``methods`` (default POST, PUT, PATCH, DELETE; None: every
        request)."""
        return StampingHandler(self, methods)

    def opener(self, *handlers: urllib.request.BaseHandler, methods: Optional[Collection[str]] = MUTATING_METHODS) -> urllib.request.OpenerDirector:
        """A ``urllib.request`` opener whose requests of ``methods`` carry the
        lease's ``Fencing-Token`` and ``Fence-Sequencer``, and are refused
        (:class:`fence.LeaseEndedError`, nothing sent) once it has ended::

            opener = lease.opener()
            opener.open(urllib.request.Request(url, data=b"...", method="PUT"))
        """
        return urllib.request.build_opener(self.handler(methods), *handlers)


class StampingHandler(urllib.request.BaseHandler):
    """A ``urllib.request`` pre-processor that adds a lease's Fencing-Token
    and Fence-Sequencer to each request of ``methods`` (None: all), and
    refuses them with :class:`fence.LeaseEndedError` after the lease has
    ended. Other requests pass untouched."""

    handler_order = 100  # before the handlers that send

    def __init__(self, lease: Lease, methods: Optional[Collection[str]] = MUTATING_METHODS) -> None:
        self.lease = lease
        self.methods = None if methods is None else frozenset(m.upper() for m in methods)

    def _stamp(self, req: urllib.request.Request) -> urllib.request.Request:
        if self.methods is not None and req.get_method().upper() not in self.methods:
            return req
        for k, v in self.lease.stamp({}).items():
            req.add_unredirected_header(k, v)
        return req

    http_request = _stamp
    https_request = _stamp
