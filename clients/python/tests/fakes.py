"""Loopback stand-ins for the tests: a scripted HTTP server and a TCP proxy
that a test can cut."""

from __future__ import annotations

import http.server
import json
import socket
import threading
from typing import Callable, List, Optional, Tuple, Union

#: An action of a FakeServer: (status, body, headers), "hangup" (close the
#: connection without answering), or a callable that handles the request.
Action = Union[Tuple[int, bytes, dict], str, Callable[["_Handler"], None]]


def problem(status: int, code: str) -> Tuple[int, bytes, dict]:
    """A problem answer, as a fence server writes it."""
    body = {"type": "urn:fence:problem:" + code, "title": code, "status": status, "detail": "fake " + code, "code": code}
    return status, json.dumps(body).encode(), {"Content-Type": "application/problem+json"}


class _Handler(http.server.BaseHTTPRequestHandler):
    server: "FakeServer"
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:  # quiet
        pass

    def _serve(self) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        fake = self.server
        with fake.lock:
            fake.requests.append((self.command, self.path, dict(self.headers), body))
            action = fake.script.pop(0) if fake.script else fake.default
        if action == "hangup":
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        if callable(action):
            action(self)
            return
        status, data, headers = action  # type: ignore[misc]
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _serve


class FakeServer(http.server.ThreadingHTTPServer):
    """An HTTP server on a loopback port that answers each request with the
    next action of ``script``, then with ``default``, and records the
    requests as (method, path, headers, body)."""

    daemon_threads = True

    def __init__(self, script: Optional[List[Action]] = None, default: Action = "hangup") -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.script: List[Action] = list(script or [])
        self.default = default
        self.requests: List[tuple] = []
        self.addr = "http://127.0.0.1:%d" % self.server_address[1]
        self._thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.shutdown()
        self.server_close()

    def __enter__(self) -> "FakeServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Proxy:
    """A TCP proxy on a loopback port in front of ``upstream`` (host, port).
    ``cut()`` closes every connection open now; while ``down`` is set, new
    connections are closed at once (a server that cannot be reached, as
    seen through a load balancer); ``upstream`` may be changed to follow a
    restarted server."""

    def __init__(self, upstream: Tuple[str, int]) -> None:
        self.upstream = upstream
        self.down = False
        self._lsock = socket.socket()
        self._lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._lsock.bind(("127.0.0.1", 0))
        self._lsock.listen(16)
        self.port = self._lsock.getsockname()[1]
        self.addr = "http://127.0.0.1:%d" % self.port
        self._lock = threading.Lock()
        self._conns: List[socket.socket] = []
        self.accepted = 0
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self._lsock.accept()
            except OSError:
                return
            with self._lock:
                self.accepted += 1
                down = self.down or self._closed
            if down:
                _close(c)
                continue
            try:
                u = socket.create_connection(self.upstream, timeout=5)
                u.settimeout(None)
            except OSError:
                _close(c)
                continue
            with self._lock:
                self._conns += [c, u]
            threading.Thread(target=self._pump, args=(c, u), daemon=True).start()
            threading.Thread(target=self._pump, args=(u, c), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                b = src.recv(65536)
                if not b:
                    break
                dst.sendall(b)
        except OSError:
            pass
        _close(src)
        _close(dst)

    def cut(self) -> None:
        """Close every connection open now, both ways."""
        with self._lock:
            conns, self._conns = self._conns, []
        for s in conns:
            _close(s)

    def close(self) -> None:
        """Stop the proxy."""
        self._closed = True
        self.cut()
        _close(self._lsock)


def _close(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        s.close()
    except OSError:
        pass
