"""Watching: GET /v1/watch as an iterator of :class:`Event`, that reconnects
by itself with Last-Event-ID after a disconnect, so that no event is missed
while the server still has them; when it has not (it restarted, another
server leads, or the events are too old), the first event after the
reconnect is a ``lost`` event, which the iterator yields like any other: the
caller should list the locks again."""

from __future__ import annotations

import datetime as _dt
import http.client
import json
import random
import socket
import threading
import time
import urllib.parse
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Deque, Iterator, Mapping, Optional

from ._transport import _TLSRefused
from .errors import FenceError, SSEError, TransportError, problem_error
from .sse import SSEEvent, SSEParser
from .types import parse_time

if TYPE_CHECKING:  # pragma: no cover
    from ._transport import Transport

__all__ = ["Event", "Watch", "decode_event", "EVENT_TYPES"]

#: The event types of the API.
EVENT_TYPES = frozenset(
    ["granted", "renewed", "released", "expired", "revoked", "revoke_requested", "fence_raised", "write_rejected", "lost"]
)


@dataclass(frozen=True)
class Event:
    """One change to a lock or a fence, or a ``lost`` notice. Members that do
    not apply to the type are None. ``id`` is the event's stream ID
    (``<stream>-<seq>``), ``time`` when the server made the change, ``data``
    the whole decoded JSON object (members this client does not know
    included). ``shared`` is True for the event of a shared hold (its
    ``holder`` is one of the group, its ``token`` the group's)."""

    type: str
    resource: str = ""
    holder: Optional[str] = None
    token: Optional[int] = None
    last_fence: Optional[int] = None
    revision: Optional[int] = None
    key: Optional[str] = None
    op: Optional[str] = None
    expires_at: Optional[_dt.datetime] = None
    time: Optional[_dt.datetime] = None
    id: str = ""
    detail: Optional[str] = None
    data: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    #: True for a shared hold's event (``"mode": "shared"``): granted,
    #: renewed, released, expired, and the revoked event of each holder of a
    #: revoked group.
    shared: bool = False


def _member(d: Mapping[str, Any], name: str, kind: type) -> Any:
    v = d.get(name)
    if v is None:
        return None
    if kind is int:
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise SSEError("event stream: %s %r is not a non-negative integer" % (name, v))
        return v
    if not isinstance(v, str):
        raise SSEError("event stream: %s %r is not a string" % (name, v))
    return v


def _time(d: Mapping[str, Any], name: str) -> Optional[_dt.datetime]:
    v = _member(d, name, str)
    if v is None or v == "":
        return None
    try:
        return parse_time(v)
    except ValueError:
        raise SSEError("event stream: %s %r is not an RFC 3339 time" % (name, v)) from None


def decode_event(ev: SSEEvent) -> Event:
    """Turn a dispatched SSE event into an :class:`Event`. Its data must be
    one JSON object whose members have the API's types; otherwise raise
    :class:`fence.SSEError`, the only error it raises. ``type`` comes from the
    data, else from the ``event:`` field."""
    try:
        d = json.loads(ev.data)
    except (ValueError, RecursionError):
        raise SSEError("event stream: event %r: data is not JSON" % (ev.id,)) from None
    if not isinstance(d, dict):
        raise SSEError("event stream: event %r: data is not a JSON object" % (ev.id,))
    typ = _member(d, "type", str) or ev.type
    return Event(
        type=typ,
        resource=_member(d, "resource", str) or "",
        holder=_member(d, "holder", str),
        token=_member(d, "token", int),
        last_fence=_member(d, "last_fence", int),
        revision=_member(d, "revision", int),
        key=_member(d, "key", str),
        op=_member(d, "op", str),
        expires_at=_time(d, "expires_at"),
        time=_time(d, "time"),
        id=ev.id,
        detail=_member(d, "detail", str),
        data=d,
        shared=_member(d, "mode", str) == "shared",
    )


class Watch(Iterator[Event]):
    """An open watch: iterate it for events; ``close()`` (from any thread)
    ends it, and the iteration then stops. Made by :meth:`fence.Client.watch`.

    After a disconnect (the stream ends, breaks, stays silent for
    ``idle_timeout`` seconds, or the server answers 503) it reconnects,
    moving on to the next server address after a failure, and sends the ID
    of the last event it received as Last-Event-ID. It waits the stream's
    ``retry`` time before reconnecting (``reconnect_delay`` if given),
    doubling it (at most ``max_reconnect_delay``) while attempts keep failing.
    An error answer other than 503 (400, 401, 403, 404...) is raised from the
    iteration: retrying would not help. It iterates in one thread at a time.
    """

    def __init__(
        self,
        transport: "Transport",
        prefix: str = "",
        last_event_id: Optional[str] = None,
        *,
        reconnect_delay: Optional[float] = None,
        max_reconnect_delay: float = 10.0,
        idle_timeout: float = 35.0,
        max_line: int = 1 << 20,
    ) -> None:
        self._t = transport
        self.prefix = prefix
        self._last_id = last_event_id or ""  # the stream's, sent on reconnects
        self._yielded_id = self._last_id  # of the last event handed out
        self._delay = reconnect_delay
        self._max_delay = max_reconnect_delay
        self._idle = idle_timeout
        self._max_line = max_line
        self._server_retry: Optional[float] = None
        self._queue: Deque[Event] = deque()
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._conn: Optional[http.client.HTTPConnection] = None
        self._sock: Optional[socket.socket] = None
        self._resp: Optional[http.client.HTTPResponse] = None
        self._parser: Optional[SSEParser] = None
        self._failures = 0
        self._moved_from: Optional[int] = None
        self._error: Optional[FenceError] = None
        #: How many times the watch connected (1 after the first connect).
        self.connects = 0
        self._connect_first()

    # -- public -------------------------------------------------------------

    @property
    def last_event_id(self) -> str:
        """The ID of the last event this watch yielded (the ``last_event_id``
        it was opened with before the first; "" if none): pass it as
        ``last_event_id`` to a new watch to resume after it."""
        return self._yielded_id

    @property
    def closed(self) -> bool:
        """Whether close was called."""
        return self._closed.is_set()

    def close(self) -> None:
        """End the watch. Safe to call from any thread, and more than once."""
        self._closed.set()
        self._drop()

    def __enter__(self) -> "Watch":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __iter__(self) -> "Watch":
        return self

    def __next__(self) -> Event:
        while True:
            if self._closed.is_set():
                self._queue.clear()
                self._drop()
                raise StopIteration
            if self._queue:
                ev = self._queue.popleft()
                self._yielded_id = ev.id
                return ev
            if self._error is not None:
                err, self._error = self._error, None
                self.close()
                raise err
            if self._resp is None:
                if self._sleep_before_reconnect():
                    try:
                        self._open()
                    except _Retry:
                        pass
                continue
            self._read()

    # -- connection ---------------------------------------------------------

    def _path(self) -> str:
        q = {}
        if self.prefix:
            q["prefix"] = self.prefix
        return "/v1/watch" + ("?" + urllib.parse.urlencode(q) if q else "")

    def _connect_first(self) -> None:
        """Connect before returning, so that the watch sees every event made
        after it was opened; retry as a read would, for up to retry_for."""
        start = time.monotonic()
        while True:
            try:
                self._open()
                return
            except _Retry as r:
                if time.monotonic() - start >= self._t.retry_for or self._closed.is_set():
                    raise r.err from None
                i = self._t.servers.current()
                if not self._t.servers.failed_recently(i):
                    continue
                if self._closed.wait(min(0.05 * (2 ** min(self._failures, 5)), 1.0)):
                    raise r.err from None

    def _sleep_before_reconnect(self) -> bool:
        """Wait before a reconnect; False if the watch was closed meanwhile."""
        i = self._t.servers.current()
        if self._moved_from is not None and i != self._moved_from and not self._t.servers.failed_recently(i):
            wait = 0.0  # another server, which has not failed lately: at once
        else:
            if self._delay is not None:
                base = self._delay
            elif self._server_retry is not None:
                base = self._server_retry
            else:
                base = 1.0
            wait = min(base * (2 ** min(max(0, self._failures - 1), 16)), max(self._max_delay, base))
            wait *= 0.75 + random.random() / 4
        if wait > 0 and self._closed.wait(wait):
            return False
        return not self._closed.is_set()

    def _open(self) -> None:
        i = self._t.servers.current()
        base = self._t.servers.addrs[i]
        headers = {"Accept": "text/event-stream", "Cache-Control": "no-cache", "User-Agent": "fence-python/0.1"}
        if self._t.auth_token:
            headers["Authorization"] = "Bearer " + self._t.auth_token
        if self._last_id:
            headers["Last-Event-ID"] = self._last_id
        what = "GET %s" % self._path()
        try:
            conn, prefix = self._t.connect(base, self._t.timeout)
        except TransportError as e:
            self._fail(i)
            raise _Retry(TransportError("%s: %s" % (what, e), sent=False, addr=base, cause=e.__cause__)) from None
        except _TLSRefused as e:  # retrying would not help
            self._closed.set()
            raise TransportError("%s: %s" % (what, e), sent=False, addr=base, cause=e.__cause__) from None
        except OSError as e:  # another TLS failure
            self._fail(i)
            raise _Retry(TransportError("%s: %s: %s" % (what, base, e), sent=True, addr=base, cause=e)) from None
        with self._lock:
            self._conn = conn
            # http.client drops conn.sock when the answer is delimited by the
            # connection's close: keep the socket to time out and cut it.
            self._sock = conn.sock
        if self._closed.is_set():
            self._drop()
            raise _Retry(TransportError("%s: closed" % what, sent=False, addr=base))
        try:
            conn.request("GET", prefix + self._path(), headers=headers)
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException) as e:
            self._drop()
            self._fail(i)
            raise _Retry(TransportError("%s: %s: %s" % (what, base, str(e) or type(e).__name__), sent=True, addr=base, cause=e)) from None
        if resp.status != 200:
            try:
                body = resp.read()
            except (OSError, http.client.HTTPException):
                body = b""
            self._drop()
            err = problem_error(resp.status, body, {k.lower(): v for k, v in resp.msg.items()})
            if resp.status == 503:
                self._fail(i)
                raise _Retry(err)
            self._closed.set()  # retrying would not help: the watch ends
            raise err
        ctype = resp.getheader("Content-Type", "")
        if not ctype.split(";")[0].strip().lower() == "text/event-stream":
            self._drop()
            self._closed.set()
            raise FenceError(
                "%s: %s answered Content-Type %r, not text/event-stream" % (what, base, ctype), status=resp.status
            )
        try:
            if self._sock is not None:
                self._sock.settimeout(self._idle)
        except OSError:
            pass
        with self._lock:
            self._resp = resp
        self._parser = SSEParser(self._last_id, max_line=self._max_line)
        self._failures = 0
        self._moved_from = None
        self.connects += 1

    def _fail(self, i: int) -> None:
        self._failures += 1
        self._moved_from = i
        self._t.servers.fail(i)

    def _drop(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
            sock, self._sock = self._sock, None
            resp, self._resp = self._resp, None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if resp is not None:
            resp.close()
        if conn is not None:
            conn.close()

    def _read(self) -> None:
        resp, parser = self._resp, self._parser
        assert parser is not None
        try:
            chunk = resp.read1(65536) if resp is not None else b""
        except (OSError, http.client.HTTPException, ValueError, AttributeError):
            chunk = b""
        if not chunk:
            # The stream ended or broke: drop an unfinished event, reconnect.
            try:
                parser.close()
            except SSEError:
                pass
            self._remember(parser)
            self._drop()
            self._failures = 1
            return
        try:
            for sse in parser.feed(chunk):
                self._queue.append(decode_event(sse))
        except SSEError as e:
            # The events before the bad one are still yielded, then the error.
            self._error = e
            self._drop()
        self._remember(parser)

    def _remember(self, parser: SSEParser) -> None:
        self._last_id = parser.last_event_id
        if parser.retry is not None:
            self._server_retry = parser.retry / 1000.0


class _Retry(Exception):
    def __init__(self, err: FenceError) -> None:
        super().__init__(str(err))
        self.err = err
