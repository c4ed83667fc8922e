"""Failover between addresses and the resend rules, as the Go client has
them: which calls are resent after which failures, and the ambiguous error
of a write whose outcome is unknown."""

from __future__ import annotations

import time
import unittest

import fence

from .fakes import FakeServer, Proxy, problem
from .fenceserver import FenceServer, free_port


class FailoverTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.server = FenceServer()
        cls.addClassCleanup(cls.server.stop)
        cls.real = cls.server.addr


    def setUp(self) -> None:
        self.fake = FakeServer()
        self.addCleanup(self.fake.stop)

    def client(self, **kw: object) -> fence.Client:
        return fence.Client("%s,%s" % (self.fake.addr, self.real), timeout=5, **kw)  # type: ignore[arg-type]

    def test_addresses(self) -> None:
        c = fence.Client(" http://a:1/ , HTTPS://b:2/x ")
        self.assertEqual(c.addrs, ["http://a:1", "https://b:2/x"])
        for bad in ("", "a:1", "ftp://a", "http://a:1,,http://b:1", "http://a:1,http://A:1", "http://a:1/?q", "http://a:1#f", "http://a:x"):
            with self.subTest(addr=bad):
                with self.assertRaises(ValueError):
                    fence.Client(bad)

    def test_unreachable_address_is_skipped(self) -> None:
        c = fence.Client("http://127.0.0.1:%d,%s" % (free_port(), self.real))
        lease = c.acquire("fo-dial", ttl=5)
        self.assertEqual(c.current, self.real)
        # Even a txn is resent after a dial error: nothing was sent.
        c2 = fence.Client("http://127.0.0.1:%d,%s" % (free_port(), self.real))
        rev = c2.txn({"fo-dial": lease.token}, ops=[fence.Put("fo-dial", "k", b"v")])
        self.assertGreater(rev, 0)
        lease.release()

    def test_dial_error_is_not_ambiguous(self) -> None:
        c = fence.Client("http://127.0.0.1:%d" % free_port(), retry_for=0.3)
        t0 = time.monotonic()
        with self.assertRaises(fence.TransportError) as cm:
            c.txn({"x": 1})
        self.assertFalse(cm.exception.sent)
        self.assertFalse(fence.is_ambiguous(cm.exception))
        self.assertLess(time.monotonic() - t0, 3)

    def test_not_leader_resends_anything(self) -> None:
        self.fake.script = [problem(503, "not_leader")]
        c = self.client()
        lease = c.acquire_raw("fo-nl", "a", ttl=5)  # resent to the real server
        self.assertEqual(c.current, self.real)
        self.fake.script = [problem(503, "not_leader")]
        c = self.client()
        rev = c.txn({"fo-nl": lease.token}, ops=[fence.Put("fo-nl", "k", b"v")])
        self.assertEqual(len(self.fake.requests), 2)
        self.assertEqual(c.get("fo-nl", "k").revision, rev)
        c.release("fo-nl", lease.token)

    def test_unavailable_is_not_resent_for_unsafe_calls(self) -> None:
        lease = fence.Client(self.real).acquire_raw("fo-un", "a", ttl=5)
        for name, call in [
            ("txn", lambda c: c.txn({"fo-un": lease.token}, ops=[fence.Put("fo-un", "t", b"v")])),
            ("delete", lambda c: c.delete("fo-un", "t", lease.token)),
            ("conditional put", lambda c: c.put("fo-un", "t", b"v", lease.token, if_none_match=True)),
            ("revoke", lambda c: c.revoke("fo-un")),
        ]:
            with self.subTest(call=name):
                self.fake.requests.clear()
                self.fake.script = [problem(503, "unavailable")]
                c = self.client()
                with self.assertRaises(fence.UnavailableError) as cm:
                    call(c)
                self.assertTrue(fence.is_ambiguous(cm.exception))
                self.assertEqual(len(self.fake.requests), 1)
                self.assertEqual(c.current, self.real)  # moved on for the next call
        with self.assertRaises(fence.NotFoundError):
            fence.Client(self.real).get("fo-un", "t")  # nothing reached the real server
        self.assertTrue(fence.Client(self.real).status("fo-un").held)

    def test_hangup_is_ambiguous_for_unsafe_calls(self) -> None:
        lease = fence.Client(self.real).acquire_raw("fo-hu", "a", ttl=5)
        fence.Client(self.real).put("fo-hu", "k", b"v", lease.token)
        self.fake.script = ["hangup"]
        c = self.client()
        with self.assertRaises(fence.TransportError) as cm:
            c.delete("fo-hu", "k", lease.token)
        self.assertTrue(cm.exception.sent)
        self.assertTrue(fence.is_ambiguous(cm.exception))
        self.assertEqual(fence.Client(self.real).get("fo-hu", "k").value, b"v")

    def test_safe_calls_are_resent(self) -> None:
        lease = fence.Client(self.real).acquire_raw("fo-safe", "a", ttl=5)
        for name, call in [
            ("get", lambda c: c.fence("fo-safe")),
            ("status", lambda c: c.status("fo-safe")),
            ("list", lambda c: c.list_locks()),
            ("acquire", lambda c: c.acquire_raw("fo-safe", "a", ttl=5)),
            ("renew", lambda c: c.renew("fo-safe", lease.token)),
            ("put", lambda c: c.put("fo-safe", "k", b"v", lease.token)),
            ("claim", lambda c: c.claim("fo-safe", lease.token)),
        ]:
            for failure in ("hangup", problem(503, "unavailable")):
                with self.subTest(call=name, failure=failure[0] if isinstance(failure, tuple) else failure):
                    self.fake.requests.clear()
                    self.fake.script = [failure]
                    c = self.client()
                    call(c)
                    self.assertEqual(len(self.fake.requests), 1)
                    self.assertEqual(c.current, self.real)

    def test_maybe_applied(self) -> None:
        # A put that met 503 unavailable and then an answer: the answer is
        # raised, marked as maybe applied by the earlier attempt.
        real = fence.Client(self.real)
        old = real.acquire_raw("fo-maybe", "a", ttl=5)
        real.revoke("fo-maybe")
        self.fake.script = [problem(503, "unavailable")]
        c = self.client()
        with self.assertRaises(fence.FencedError) as cm:
            c.put("fo-maybe", "k", b"v", old.token)
        e = cm.exception
        self.assertTrue(e.maybe_applied)
        self.assertIsInstance(e.earlier, fence.UnavailableError)
        self.assertTrue(fence.is_ambiguous(e))
        self.assertIn("an earlier attempt may have taken effect", str(e))
        # The same after not_leader is not ambiguous: nothing was applied.
        self.fake.script = [problem(503, "not_leader")]
        c = self.client()
        with self.assertRaises(fence.FencedError) as cm:
            c.put("fo-maybe", "k", b"v", old.token)
        self.assertFalse(cm.exception.maybe_applied)
        self.assertFalse(fence.is_ambiguous(cm.exception))

    def test_other_answers_are_final(self) -> None:
        self.fake.script = [problem(500, "internal")]
        c = self.client()
        with self.assertRaises(fence.InternalError) as cm:
            c.fence("fo-final")
        self.assertTrue(fence.is_ambiguous(cm.exception))
        self.assertEqual(c.current, self.fake.addr)  # an answer: the client stays
        self.assertEqual(len(self.fake.requests), 1)

    def test_malformed_answer(self) -> None:
        for body in (b"{}", b"[]", b"not json", b'{"resource":"r","held":true,"last_token":1,"expires_at":"yesterday"}'):
            with self.subTest(body=body):
                self.fake.script = [(200, body, {"Content-Type": "application/json"})]
                with self.assertRaises(fence.FenceError) as cm:
                    fence.Client(self.fake.addr).status("r")
                self.assertIn("unexpected answer", str(cm.exception))

    def test_retries_cap(self) -> None:
        self.fake.script = ["hangup"]
        c = self.client(retries=0)
        with self.assertRaises(fence.TransportError):
            c.fence("fo-cap")
        self.assertEqual(c.current, self.real)  # moved on for the calls that follow
        self.assertEqual(c.fence("fo-cap"), 0)

    def test_retry_for_bounds_the_retries(self) -> None:
        other = FakeServer(default=problem(503, "unavailable"))
        self.addCleanup(other.stop)
        self.fake.default = problem(503, "unavailable")
        c = fence.Client("%s,%s" % (self.fake.addr, other.addr), retry_for=0.6, backoff=0.05)
        t0 = time.monotonic()
        with self.assertRaises(fence.UnavailableError):
            c.fence("fo-rf")
        took = time.monotonic() - t0
        self.assertGreater(took, 0.5)
        self.assertLess(took, 3)
        n = len(self.fake.requests) + len(other.requests)
        self.assertGreaterEqual(n, 3)
        self.assertGreater(len(self.fake.requests), 0)
        self.assertGreater(len(other.requests), 0)

    def test_lease_keepalive_across_failover(self) -> None:
        # The first address goes away after the acquire (a proxy that drops
        # every connection): the renewals move to the second, and the lease
        # stays held past its TTL.
        host, port = self.server.hostport.rsplit(":", 1)
        proxy = Proxy((host, int(port)))
        self.addCleanup(proxy.close)
        c = fence.Client("%s,%s" % (proxy.addr, self.real), timeout=2)
        lease = c.acquire("fo-ka", ttl=0.9)
        self.assertEqual(c.current, proxy.addr)
        proxy.down = True
        time.sleep(1.5)
        self.assertTrue(lease.held, lease.error)
        self.assertEqual(c.current, self.real)
        self.assertEqual(fence.Client(self.real).status("fo-ka").token, lease.token)
        lease.release()
        self.assertFalse(fence.Client(self.real).status("fo-ka").held)

if __name__ == "__main__":
    unittest.main()
