"""The Lease: keepalive, local loss by the monotonic clock, release, and
the stamping adapter."""

from __future__ import annotations

import datetime as _dt
import json
import threading
import time
import unittest
import urllib.error
import urllib.request

import fence

from fence._transport import Call

from .fakes import FakeServer, problem
from .fenceserver import FenceServer


class LeaseTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.server = FenceServer()
        cls.addClassCleanup(cls.server.stop)
        cls.client = fence.Client(cls.server.addr, timeout=5)


    def test_renews_past_its_ttl(self) -> None:
        lease = self.client.acquire("renewing", ttl=0.6)
        try:
            first = lease.expires_at
            time.sleep(1.5)  # well past the TTL: only renewals keep it
            self.assertTrue(lease.held, lease.error)
            self.assertGreater(lease.expires_at, first)
            self.assertGreater(lease.deadline, time.monotonic())
            st = self.client.status("renewing")
            self.assertTrue(st.held)
            self.assertEqual(st.token, lease.token)
            lease.put("k", "v")
        finally:
            lease.release()
        self.assertTrue(lease.done.is_set())
        self.assertFalse(lease.lost.is_set())
        self.assertIsNone(lease.error)
        self.assertFalse(self.client.status("renewing").held)
        lease.release()  # again: a no-op

    def test_lost_locally_while_the_server_is_frozen(self) -> None:
        ttl = 1.0
        lease = self.client.acquire("frozen", ttl=ttl)
        returned = time.monotonic()
        try:
            # Counted from a send (the acquire's, or the renewal's that an
            # acquire slower than the margin makes before it returns), less
            # the margin: never from the answer.
            self.assertLessEqual(lease.deadline, returned + ttl - ttl / 10)
            last_send = lease.deadline - (ttl - ttl / 10)
            self.server.pause()
            try:
                lost = lease.lost.wait(ttl + 1)
                at = time.monotonic()
                self.assertTrue(lost, "the lease did not declare itself lost")
                # Before the TTL ran out by the local clock, counted from
                # before the last request that held the lease was sent.
                self.assertLess(at, last_send + ttl, "lost at +%.3fs, TTL %.1fs" % (at - last_send, ttl))
                self.assertIsInstance(lease.error, fence.LeaseExpiredError)
                self.assertTrue(lease.done.is_set())
                self.assertTrue(fence.is_lost(lease.error))
            finally:
                self.server.resume()
            # Writes through a lost lease are refused without being sent.
            with self.assertRaises(fence.LeaseEndedError) as cm:
                lease.put("k", b"v")
            self.assertIs(cm.exception.reason, lease.error)
            with self.assertRaises(fence.LeaseEndedError):
                lease.stamp()
        finally:
            lease.release()
        self.assertTrue(self.client.ready())

    def test_renewals_sent_to_a_frozen_server_apply_nothing(self) -> None:
        # The renewals the keepalive sends while the server is frozen wait
        # in the server's sockets; they carry the keepalive's deadline on
        # the server's clock (Fence-Deadline), learnt from the renewals
        # answered before, so when the server wakes none of them may hold
        # the lease for another TTL that nobody renews.
        client = fence.Client(self.server.addr, timeout=5, session=False)
        ttl = 1.0
        lease = client.acquire("frozen-renewals", ttl=ttl)
        try:
            time.sleep(ttl)  # renewals answered: the client learns the server's clock
            self.assertTrue(lease.held, lease.error)
            self.server.pause()
            try:
                self.assertTrue(lease.lost.wait(ttl + 1), "the lease did not declare itself lost")
            finally:
                woke = _dt.datetime.now(_dt.timezone.utc)
                self.server.resume()
            refused = "the client had given up on this request"
            deadline = time.monotonic() + 10
            while not any(refused in line for line in list(self.server.log)):
                if time.monotonic() > deadline:
                    self.fail("no renewal sent to the frozen server was refused for its deadline; server log:\n" + "\n".join(self.server.log[-20:]))
                time.sleep(0.05)
            for line in list(self.server.log):
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if rec.get("msg") == "lock renewed" and rec.get("resource") == "frozen-renewals" and fence.parse_time(rec["time"]) > woke:
                    self.fail("a renewal sent before the lease was given up was applied after the server woke:\n" + line)
        finally:
            lease.release()

    def test_lease_lost_answer_ends_it_at_once(self) -> None:
        lease = self.client.acquire("revoked", ttl=1.5)
        rv = self.client.revoke("revoked")
        self.assertEqual(rv.revoked_token, lease.token)
        self.assertGreater(rv.last_fence, lease.token)
        # The next renewal (at ttl/3) hears lease_lost.
        self.assertTrue(lease.lost.wait(1.5))
        self.assertIsInstance(lease.error, fence.LeaseLostError)
        self.assertEqual(lease.error.presented, lease.token)
        lease.release()  # nothing to release; no error

    def test_lock_context_manager(self) -> None:
        with self.client.lock("ctx", ttl=5) as lease:
            self.assertEqual(self.client.status("ctx").token, lease.token)
            lease.put("a", b"1")
            lease.compare_and_swap("b", b"2", 0)
            with self.assertRaises(fence.PreconditionFailedError):
                lease.compare_and_swap("b", b"3", 0)
            rev = lease.get("b").revision
            lease.compare_and_swap("b", b"3", rev)
            self.assertEqual(lease.claim(), lease.token)
            lease.delete("a")
        self.assertFalse(self.client.status("ctx").held)

        # The block's exception propagates, and the lease is released.
        with self.assertRaises(ZeroDivisionError):
            with self.client.lock("ctx", ttl=5):
                1 / 0
        self.assertFalse(self.client.status("ctx").held)

        # A lease lost while the block ran is raised on leaving it.
        with self.assertRaises(fence.LeaseLostError):
            with self.client.lock("ctx", ttl=0.9) as lease:
                self.client.revoke("ctx")
                lease.lost.wait(2)

    def test_wait_for_the_lock(self) -> None:
        first = self.client.acquire("queue", ttl=5)
        got = []

        def waiter() -> None:
            with self.client.lock("queue", ttl=5, wait=5) as l2:
                got.append(l2.token)

        t = threading.Thread(target=waiter)
        t.start()
        time.sleep(0.3)
        self.assertEqual(got, [])
        first.release()
        t.join(10)
        self.assertEqual(got, [first.token + 1])

        with self.assertRaises(fence.LockHeldError):
            with self.client.lock("queue", ttl=5):
                with self.client.lock("queue", ttl=5, wait=0.2):
                    pass

    def test_bad_safety_margin(self) -> None:
        for m in (-1, 2, 3):
            with self.assertRaises(ValueError):
                self.client.acquire("margin", ttl=2, safety_margin=m)
        lease = self.client.acquire("margin", ttl=2, safety_margin=0.5)
        self.assertAlmostEqual(lease.deadline - time.monotonic(), 1.5, delta=0.3)
        lease.release()

    def test_txn_through_the_lease(self) -> None:
        other = self.client.acquire("txn-b", ttl=5)
        with self.client.lock("txn-a", ttl=5) as lease:
            rev = lease.txn(
                ops=[fence.Put("txn-a", "x", b"\x00\xff"), fence.Put("txn-b", "y", "text")],
                fences={"txn-b": other.token},
            )
            self.assertEqual(self.client.get("txn-a", "x").revision, rev)
            self.assertEqual(self.client.get("txn-a", "x").value, b"\x00\xff")
            self.assertEqual(self.client.get("txn-b", "y").value, b"text")
            with self.assertRaises(fence.PreconditionFailedError):
                lease.txn(compares=[fence.Compare("txn-a", "x", rev + 100)], ops=[fence.Delete("txn-a", "x")])
            lease.txn(compares=[fence.Compare("txn-a", "x", rev)], ops=[fence.Delete("txn-a", "x")])
            with self.assertRaises(fence.NotFoundError):
                self.client.get("txn-a", "x")
        other.release()

    def test_transfer_to_a_named_waiter(self) -> None:
        """The lease goes to the named waiter behind another, with a greater
        token, in one change: the old token is fenced at once, the waiter
        before keeps waiting, and a transfer to nobody changes nothing."""
        lease = self.client.acquire("handover", ttl=0.6)
        with self.assertRaises(fence.NotFoundError):
            lease.transfer("nobody")
        time.sleep(1.5)  # past the TTL: only renewals, started again, keep it
        self.assertTrue(lease.held, lease.error)
        got: dict = {}

        def wait(holder: str) -> None:
            got[holder] = self.client.acquire("handover", ttl=5, wait=30, holder=holder)

        threads = []
        for i, holder in enumerate(["a", "b"]):  # a waits first, b behind it
            th = threading.Thread(target=wait, args=(holder,))
            th.start()
            threads.append(th)
            deadline = time.monotonic() + 10
            while not any(l.resource == "handover" and l.waiters == i + 1 for l in self.client.list_locks("handover").locks):
                self.assertLess(time.monotonic(), deadline, "%s never waited" % holder)
                time.sleep(0.005)
        succ = lease.transfer("b")
        threads[1].join(10)
        b = got["b"]
        self.assertEqual((succ.holder, succ.token), ("b", b.token))
        self.assertGreater(b.token, lease.token)
        self.assertTrue(lease.done.is_set())
        self.assertIsNone(lease.error)
        with self.assertRaises(fence.FencedError):
            self.client.put("handover", "k", b"stale", lease.token)
        self.assertNotIn("a", got)
        b.release()  # a kept its place
        threads[0].join(10)
        self.assertEqual(got["a"].holder, "a")
        got["a"].release()


class DeadlineTest(unittest.TestCase):
    """Fence-Deadline on renewals, against a scripted server whose clock is
    100 s ahead of ours."""

    AHEAD = 100.0

    def _lease(self, handler) -> None:  # type: ignore[no-untyped-def]
        now = _dt.datetime.now(_dt.timezone.utc) + _dt.timedelta(seconds=self.AHEAD + 5)
        body = json.dumps(
            {"resource": "r", "holder": "h", "token": 1, "ttl_ms": 5000, "expires_at": now.isoformat().replace("+00:00", "Z")}
        ).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def test_deadline_on_the_server_clock_and_dropped_when_refused(self) -> None:
        with FakeServer(script=[self._lease, self._lease, problem(400, "bad_request"), self._lease]) as fake:
            c = fence.Client(fake.addr, timeout=5, retries=0, session=False)
            c.renew("r", 1)  # no deadline: none sent; the answer teaches the clock
            c.renew("r", 1, _call=Call(time.monotonic() + 2))
            sent = time.time()
            c.renew("r", 1, _call=Call(time.monotonic() + 2))  # refused: sent again without one
            headers = [{k.lower(): v for k, v in h.items()} for _, _, h, _ in fake.requests]
        self.assertNotIn("fence-deadline", headers[0])
        d = fence.parse_time(headers[1]["fence-deadline"]).timestamp()
        self.assertAlmostEqual(d, sent + 2 + self.AHEAD, delta=1.0)
        self.assertIn("fence-deadline", headers[2])
        self.assertNotIn("fence-deadline", headers[3], "a refused deadline was sent again")
        self.assertEqual(len(headers), 4)


class StampingTest(unittest.TestCase):
    """The stamping adapter, against a service that checks tokens: the fence
    server's own storage, written through urllib."""

    @classmethod
    def setUpClass(cls) -> None:
        cls.server = FenceServer()
        cls.addClassCleanup(cls.server.stop)
        cls.client = fence.Client(cls.server.addr)


    def url(self, resource: str, key: str) -> str:
        return "%s/v1/kv/%s/%s" % (self.server.addr, resource, key)

    def test_stamp_headers(self) -> None:
        with self.client.lock("stamp", ttl=5) as lease:
            h = {"X-Other": "1"}
            out = lease.stamp(h)
            self.assertIs(out, h)
            self.assertEqual(h, {"X-Other": "1", "Fencing-Token": str(lease.token)})
            self.assertNotIn("Fence-Sequencer", lease.stamp())

    def test_opener_stamps_writes(self) -> None:
        old = self.client.acquire_raw("stamp-o", "old", ttl=0.2)
        time.sleep(0.3)
        with self.client.lock("stamp-o", ttl=5) as lease:
            opener = lease.opener()
            req = urllib.request.Request(self.url("stamp-o", "report"), data=b"done", method="PUT")
            with opener.open(req, timeout=5) as resp:
                self.assertEqual(resp.status, 200)
            item = self.client.get("stamp-o", "report")
            self.assertEqual((item.value, item.token), (b"done", lease.token))
            # A GET is not stamped (and needs no token).
            with opener.open(self.url("stamp-o", "report"), timeout=5) as resp:
                self.assertEqual(resp.read(), b"done")
            # Without the adapter the service refuses the write...
            with self.assertRaises(urllib.error.HTTPError) as cm:
                urllib.request.urlopen(urllib.request.Request(self.url("stamp-o", "x"), data=b"x", method="PUT"), timeout=5)
            self.assertEqual(cm.exception.code, 428)
            # ...and an adapter of the stale lease is fenced.
            stale = urllib.request.build_opener(_StaticStamp(old.token))
            with self.assertRaises(urllib.error.HTTPError) as cm:
                stale.open(urllib.request.Request(self.url("stamp-o", "report"), data=b"stale", method="PUT"), timeout=5)
            self.assertEqual(cm.exception.code, 409)
            err = fence.problem_error(cm.exception.code, cm.exception.read(), dict(cm.exception.headers))
            self.assertIsInstance(err, fence.FencedError)
            self.assertEqual(err.presented, old.token)
        # After release the adapter refuses to send.
        with self.assertRaises(fence.LeaseEndedError):
            opener.open(urllib.request.Request(self.url("stamp-o", "report"), data=b"late", method="PUT"), timeout=5)
        self.assertEqual(self.client.get("stamp-o", "report").value, b"done")

    def test_opener_all_methods(self) -> None:
        with self.client.lock("stamp-all", ttl=5) as lease:
            seen = {}

            class Capture(urllib.request.BaseHandler):
                handler_order = 900

                def http_request(self, req: urllib.request.Request) -> urllib.request.Request:
                    seen.update({k.lower(): v for k, v in req.header_items()})
                    return req

            opener = lease.opener(Capture(), methods=None)
            try:
                opener.open(self.url("stamp-all", "missing"), timeout=5)
            except urllib.error.HTTPError as e:
                self.assertEqual(e.code, 404)
            self.assertEqual(seen.get("fencing-token"), str(lease.token))


class _StaticStamp(urllib.request.BaseHandler):
    def __init__(self, token: int) -> None:
        self.token = token

    def http_request(self, req: urllib.request.Request) -> urllib.request.Request:
        req.add_unredirected_header("Fencing-Token", str(self.token))
        return req


if __name__ == "__main__":
    unittest.main()
