"""The HTTP side of the client: server addresses with failover, one attempt
of a request, and the retry loop. It mirrors the Go client
(httpapi.Client.do): after a transport error or a 503 the client moves on to
the next address; a call is resent when it certainly did not take effect (no
connection could be made, or 503 not_leader), and after any other transport
error or 503 only if it is safe to repeat."""

from __future__ import annotations

import http.client
import random
import socket
import ssl
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from .errors import FenceError, NotLeaderError, TransportError, problem_error

USER_AGENT = "fence-python/0.1"

#: The longest wait between two retries, in seconds.
MAX_BACKOFF = 1.0
#: How long an address counts as failed: a retry that moves to an address
#: that failed longer ago goes at once.
RECENT_FAILURE = 2 * MAX_BACKOFF

# Outcomes of one attempt.
ANSWERED = "answered"  # a 2xx, or an answer another attempt would not change
FINAL = "final"  # cancelled or past the deadline, or refused by TLS: no retry
UNSENT = "unsent"  # no connection could be made: the server got nothing
NOT_LEADER = "not_leader"  # 503 not_leader: the server did nothing
UNKNOWN = "unknown"  # another transport error or 503: may have taken effect


def _failed(out: str) -> bool:
    return out in (UNSENT, NOT_LEADER, UNKNOWN)


def _retry(out: str, retryable: bool) -> bool:
    return out in (UNSENT, NOT_LEADER) or (out == UNKNOWN and retryable)


def parse_addrs(addrs: str) -> List[str]:
    """Check a comma-separated list of server base URLs as the Go client
    does: each http or https with a host, no query or fragment, none empty
    and none listed twice. Return them without trailing slashes."""
    if not isinstance(addrs, str):
        raise TypeError("server address must be a str, not %s" % type(addrs).__name__)
    out: List[str] = []
    seen = set()
    for i, addr in enumerate(addrs.split(",")):
        addr = addr.strip()
        if not addr:
            if "," not in addrs:
                raise ValueError("no server address: want http://host:port or https://host:port")
            raise ValueError("server addresses %r: entry %d is empty" % (addrs, i + 1))
        try:
            u = urllib.parse.urlsplit(addr)
            u.port  # noqa: B018 - raises ValueError for a bad port
        except ValueError as e:
            raise ValueError("server address %r: %s" % (addr, e)) from None
        if u.scheme not in ("http", "https") or not u.netloc or not u.hostname:
            raise ValueError("server address %r: want http://host:port or https://host:port" % addr)
        if u.query or u.fragment or addr.endswith("?") or "#" in addr:
            raise ValueError("server address %r: no query or fragment allowed" % addr)
        base = "%s://%s%s" % (u.scheme, u.netloc, u.path.rstrip("/"))
        key = "%s://%s%s" % (u.scheme, u.netloc.lower(), u.path.rstrip("/"))
        if key in seen:
            raise ValueError("server addresses %r: %r is listed twice" % (addrs, addr))
        seen.add(key)
        out.append(base)
    return out


class Servers:
    """A client's server addresses and which one is current. Safe for
    concurrent use."""

    def __init__(self, addrs: List[str]) -> None:
        self.addrs = list(addrs)
        self._lock = threading.Lock()
        self._cur = 0
        self._failed: List[Optional[float]] = [None] * len(addrs)

    def current(self) -> int:
        """The index of the current address."""
        with self._lock:
            return self._cur

    def fail(self, i: int) -> None:
        """Record that address i failed and, if it is still current, move on
        to the next: concurrent calls that failed on the same address move
        the client on once."""
        with self._lock:
            self._failed[i] = time.monotonic()
            if self._cur == i:
                self._cur = (i + 1) % len(self.addrs)

    def failed_recently(self, i: int) -> bool:
        """Whether address i failed in the last RECENT_FAILURE seconds."""
        with self._lock:
            at = self._failed[i]
        return at is not None and time.monotonic() - at < RECENT_FAILURE


class Call:
    """What bounds one call: a deadline on the monotonic clock (None: none)
    and a cancellation that another thread may trigger. Cancelling or
    reaching the deadline cuts an attempt in flight by shutting its socket
    down."""

    def __init__(self, deadline: Optional[float] = None) -> None:
        self.deadline = deadline
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._sock: Optional[socket.socket] = None

    @property
    def cancelled(self) -> bool:
        """Whether cancel was called."""
        return self._event.is_set()

    def over(self) -> bool:
        """Whether the call must stop: cancelled, or past its deadline."""
        return self._event.is_set() or (self.deadline is not None and time.monotonic() >= self.deadline)

    def remaining(self) -> Optional[float]:
        """Seconds until the deadline, None if there is none."""
        if self.deadline is None:
            return None
        return self.deadline - time.monotonic()

    def cancel(self) -> None:
        """Stop the call: an attempt in flight is cut, no retry starts."""
        self._event.set()
        self._cut()

    def wait(self, seconds: float) -> bool:
        """Sleep up to seconds; True if cancelled meanwhile."""
        return self._event.wait(max(0.0, seconds))

    def attach(self, sock: Optional[socket.socket]) -> None:
        """Make sock the socket that cancel and the deadline cut."""
        with self._lock:
            self._sock = sock
        if sock is not None and self._event.is_set():
            self._cut()

    def _cut(self) -> None:
        with self._lock:
            sock = self._sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


@dataclass
class Request:
    """One API call. ``retryable`` says it is safe to repeat; ``extra_timeout``
    lengthens each attempt's timeout (an acquire's wait)."""

    method: str
    path: str
    body: Optional[bytes] = None
    headers: Dict[str, str] = field(default_factory=dict)
    retryable: bool = False
    extra_timeout: float = 0.0


@dataclass
class Response:
    """A successful (2xx) answer; ``headers`` keys are lower case."""

    status: int
    headers: Dict[str, str]
    body: bytes

    def json(self):  # type: ignore[no-untyped-def]
        """The body decoded as JSON."""
        import json

        return json.loads(self.body.decode("utf-8"))


class _TLSRefused(Exception):
    pass


def _headers(msg: http.client.HTTPMessage) -> Dict[str, str]:
    out: Dict[str, str] = {}
    for k, v in msg.items():
        k = k.lower()
        out[k] = v if k not in out else out[k] + ", " + v
    return out


class Transport:
    """Sends requests to the servers with the Go client's failover and retry
    rules. Each attempt uses a new connection, so that an attempt that fails
    is never one that reused a connection the server had closed."""

    def __init__(
        self,
        addrs: str,
        *,
        auth_token: Optional[str],
        timeout: float,
        retry_for: float,
        retries: Optional[int],
        backoff: float,
        ssl_context: Optional[ssl.SSLContext],
    ) -> None:
        self.servers = Servers(parse_addrs(addrs))
        self.auth_token = auth_token
        self.timeout = timeout
        self.retry_for = retry_for
        self.retries = retries
        self.backoff = backoff
        self.ssl_context = ssl_context

    # -- one connection ---------------------------------------------------

    def connect(self, base: str, timeout: float) -> Tuple[http.client.HTTPConnection, str]:
        """Open a connection to the server at base. Raise TransportError
        (sent=False) when no connection could be made, _TLSRefused when TLS
        refused it for good, and OSError for other TLS failures. Return the
        connection and the base URL's path prefix."""
        u = urllib.parse.urlsplit(base)
        host = u.hostname or ""
        https = u.scheme == "https"
        port = u.port or (443 if https else 80)
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
        try:
            conn.connect()  # TCP only: a failure here is a dial error
        except OSError as e:
            conn.close()
            raise TransportError("cannot connect to %s: %s" % (base, e), sent=False, addr=base, cause=e) from e
        if https:
            ctx = self.ssl_context or ssl.create_default_context()
            try:
                conn.sock = ctx.wrap_socket(conn.sock, server_hostname=host)
            except ssl.SSLCertVerificationError as e:
                conn.close()
                raise _TLSRefused("TLS with %s: %s" % (base, e)) from e
            except ssl.SSLError as e:
                conn.close()
                if "ALERT" in str(e).upper():
                    raise _TLSRefused("TLS with %s: %s" % (base, e)) from e
                raise
        return conn, u.path

    def _base_headers(self, req: Request) -> Dict[str, str]:
        h = {"User-Agent": USER_AGENT, "Connection": "close"}
        if self.auth_token:
            h["Authorization"] = "Bearer " + self.auth_token
        if req.body is not None:
            h["Content-Type"] = "application/json"
        h.update(req.headers)
        return h

    def once(self, base: str, req: Request, call: Call) -> Tuple[Optional[Response], Optional[FenceError], str]:
        """Send req once to the server at base and say what came of it."""
        what = "%s %s" % (req.method, req.path)
        timeout = self.timeout + req.extra_timeout
        rem = call.remaining()
        if rem is not None:
            if rem <= 0:
                return None, TransportError("%s: the call's deadline passed" % what, sent=False, addr=base), FINAL
            timeout = min(timeout, rem)
        if call.cancelled:
            return None, TransportError("%s: cancelled" % what, sent=False, addr=base), FINAL
        try:
            conn, prefix = self.connect(base, timeout)
        except TransportError as e:
            return None, TransportError("%s: %s" % (what, e), sent=False, addr=base, cause=e.__cause__), (FINAL if call.over() else UNSENT)
        except _TLSRefused as e:
            return None, TransportError("%s: %s" % (what, e), sent=False, addr=base, cause=e.__cause__), FINAL
        except OSError as e:
            out = FINAL if call.over() else UNKNOWN
            return None, TransportError("%s: TLS with %s: %s" % (what, base, e), sent=True, addr=base, cause=e), out
        timer: Optional[threading.Timer] = None
        try:
            call.attach(conn.sock)
            if rem is not None:
                timer = threading.Timer(max(0.0, call.remaining() or 0.0), call._cut)
                timer.daemon = True
                timer.start()
            try:
                try:
                    conn.request(req.method, prefix + req.path, body=req.body, headers=self._base_headers(req))
                except OSError:
                    # The server may have answered before reading the whole
                    # body (too_large) and closed: read its answer anyway.
                    pass
                hresp = conn.getresponse()
                body = hresp.read()
            except (OSError, http.client.HTTPException) as e:
                out = FINAL if call.over() else UNKNOWN
                msg = "%s: %s: %s" % (what, base, str(e) or type(e).__name__)
                if isinstance(e, socket.timeout):
                    msg = "%s: %s: timed out" % (what, base)
                return None, TransportError(msg, sent=True, addr=base, cause=e), out
        finally:
            if timer is not None:
                timer.cancel()
            call.attach(None)
            conn.close()
        headers = _headers(hresp.msg)
        if hresp.status // 100 != 2:
            err = problem_error(hresp.status, body, headers)
            if hresp.status != 503:
                return None, err, ANSWERED
            if isinstance(err, NotLeaderError):
                return None, err, NOT_LEADER
            return None, err, UNKNOWN
        return Response(hresp.status, headers, body), None, ANSWERED

    # -- the retry loop ---------------------------------------------------

    def do(self, req: Request, call: Optional[Call] = None) -> Response:
        """Send req, retrying and moving between servers as the Go client
        does, and return a 2xx answer or raise the error the last attempt
        ended with (marked maybe_applied if an earlier attempt left the
        outcome unknown)."""
        call = call or Call()
        start = time.monotonic()
        backoff = min(self.backoff, MAX_BACKOFF)
        if backoff <= 0:
            backoff = 0.05
        waits = 0
        unsure: Optional[FenceError] = None
        attempt = 0
        while True:
            i = self.servers.current()
            resp, err, out = self.once(self.servers.addrs[i], req, call)
            if _failed(out):
                self.servers.fail(i)
            if out == UNKNOWN:
                unsure = unsure or err
            elif err is not None and unsure is not None:
                err.maybe_applied = True
                err.earlier = unsure
            if err is None:
                assert resp is not None
                return resp
            if not _retry(out, req.retryable) or (self.retries is not None and attempt >= self.retries):
                raise err
            left = self.retry_for - (time.monotonic() - start)
            rem = call.remaining()
            if rem is not None:
                left = min(left, rem)
            if left <= 0:
                raise err
            attempt += 1
            nxt = self.servers.current()
            if nxt != i and not self.servers.failed_recently(nxt):
                continue  # another server, which may well answer: at once
            wait = backoff
            for _ in range(min(waits, 32)):
                wait = min(2 * wait, MAX_BACKOFF)
            waits += 1
            wait = wait / 2 + random.uniform(0, wait / 2)
            if call.wait(min(wait, left)):
                raise err
