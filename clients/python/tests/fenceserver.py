"""Runs real fence servers for the tests.

The binary is $FENCE_BIN if set, else built once per test run with
``go build -o <tempdir>/fence ./cmd/fence`` in the repository root (found
from this file). Each server listens on a free loopback port
(``--listen 127.0.0.1:0``) with its data in a temporary directory; its
address comes from its "fence serving" log line on stderr.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import List, Optional, Sequence

#: The repository root: clients/python/tests/ is three levels below it.
REPO = Path(__file__).resolve().parents[3]

_build_lock = threading.Lock()
_binary: Optional[str] = None
_build_error: Optional[str] = None
_build_dir: Optional[str] = None


def _cleanup_build() -> None:
    if _build_dir is not None:
        shutil.rmtree(_build_dir, ignore_errors=True)


def fence_binary() -> str:
    """The fence binary: $FENCE_BIN, else one built for this test run."""
    global _binary, _build_dir, _build_error
    with _build_lock:
        if _binary is not None:
            return _binary
        if _build_error is not None:
            raise RuntimeError(_build_error)
        env_bin = os.environ.get("FENCE_BIN")
        if env_bin:
            if not os.access(env_bin, os.X_OK):
                raise RuntimeError("FENCE_BIN=%s is not an executable file" % env_bin)
            _binary = env_bin
            return _binary
        if not (REPO / "go.mod").is_file():
            raise RuntimeError("cannot find the repository root (go.mod) above %s; set FENCE_BIN" % __file__)
        _build_dir = tempfile.mkdtemp(prefix="fence-py-bin-")
        atexit.register(_cleanup_build)
        out = os.path.join(_build_dir, "fence")
        t0 = time.monotonic()
        p = subprocess.run(
            ["go", "build", "-o", out, "./cmd/fence"],
            cwd=str(REPO),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            universal_newlines=True,
        )
        if p.returncode != 0:
            shutil.rmtree(_build_dir, ignore_errors=True)
            _build_error = "go build ./cmd/fence failed (once for this run):\n" + p.stdout
            raise RuntimeError(_build_error)
        if os.environ.get("FENCE_TEST_VERBOSE"):
            print("built fence in %.1fs" % (time.monotonic() - t0))
        _binary = out
        return _binary


_live: "set[FenceServer]" = set()


def _stop_all() -> None:
    for srv in list(_live):
        srv.stop()


atexit.register(_stop_all)


def hash_token(token: str) -> str:
    """The SHA-256 hex of a bearer token, as an auth file holds it."""
    return hashlib.sha256(token.encode()).hexdigest()


def free_port() -> int:
    """A loopback port that nothing listens on (free a moment ago)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class FenceServer:
    """One ``fence serve`` process on a loopback port. ``addr`` is its base
    URL. ``restart()`` starts it again on the same data directory (on a new
    port); ``pause()``/``resume()`` send SIGSTOP/SIGCONT."""

    def __init__(self, *args: str, data: Optional[str] = None) -> None:
        self.args: List[str] = list(args)
        self._own_dir = data is None
        self.dir = data or tempfile.mkdtemp(prefix="fence-py-")
        self.data = os.path.join(self.dir, "data")
        self.proc: Optional[subprocess.Popen] = None
        self.addr = ""
        self.hostport = ""
        self.log: List[str] = []
        _live.add(self)
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def file(self, name: str, text: str) -> str:
        """Write a file in the server's directory (an auth file, say) and
        return its path."""
        p = os.path.join(self.dir, name)
        with open(p, "w") as f:
            f.write(text)
        return p

    def _start(self, extra: Sequence[str] = ()) -> None:
        cmd = [fence_binary(), "serve", "--listen", "127.0.0.1:0", "--data", self.data] + self.args + list(extra)
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        assert self.proc.stderr is not None
        deadline = time.monotonic() + 30
        lines: List[str] = []
        ready = threading.Event()

        def drain() -> None:
            assert self.proc is not None and self.proc.stderr is not None
            for raw in self.proc.stderr:
                line = raw.decode("utf-8", "replace").rstrip("\n")
                lines.append(line)
                if not ready.is_set():
                    try:
                        rec = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(rec, dict) and rec.get("msg") == "fence serving":
                        self.hostport = rec["addr"]
                        ready.set()
            ready.set()

        self.log = lines
        self._drain = threading.Thread(target=drain, daemon=True)
        self._drain.start()
        while not ready.wait(0.05):
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("fence serve did not start in 30s:\n" + "\n".join(lines))
        if not self.hostport:
            code = self.proc.wait()
            raise RuntimeError("fence serve exited (%s) before serving:\n%s" % (code, "\n".join(lines)))
        self.addr = "http://" + self.hostport

    def pause(self) -> None:
        """Freeze the server (SIGSTOP)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """Unfreeze the server (SIGCONT)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def stop_process(self) -> None:
        """Stop the process: SIGCONT (if frozen) and SIGTERM, then kill after 10 s."""
        p = self.proc
        if p is None:
            return
        if p.poll() is None:  # still running: end it gracefully, then for sure
            try:
                p.send_signal(signal.SIGCONT)
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            except ProcessLookupError:
                pass
        if getattr(self, "_drain", None) is not None:
            self._drain.join(5)
        if p.stderr is not None:
            p.stderr.close()

    def restart(self, *extra: str) -> None:
        """Stop the server and start it again on the same data directory."""
        self.stop_process()
        self._start(extra)

    def stop(self) -> None:
        """Stop the server and remove its directory."""
        _live.discard(self)
        self.stop_process()
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "FenceServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def keygen(path: str) -> None:
    """Write a new signing key with ``fence keygen --out path``."""
    p = subprocess.run(
        [fence_binary(), "keygen", "--out", path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True
    )
    if p.returncode != 0:
        raise RuntimeError("fence keygen failed:\n" + p.stdout)


def wait_until(cond, timeout: float = 10.0, interval: float = 0.02) -> bool:  # type: ignore[no-untyped-def]
    """Poll cond() until it is true or timeout seconds pass; return its last value."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v or time.monotonic() >= deadline:
            return bool(v)
        time.sleep(interval)
