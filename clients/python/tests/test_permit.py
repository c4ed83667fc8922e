"""Permits of a semaphore (acquire with a limit): each is a lease on its own
slot resource, which the lease renews, releases, transfers and writes
through, and which storage fences on its own."""

from __future__ import annotations

import json
import threading
import time
import unittest
from typing import Any, Dict

import fence

from .fakes import FakeServer
from .fenceserver import FenceServer, free_port


class PermitTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.server = FenceServer()
        cls.addClassCleanup(cls.server.stop)
        cls.client = fence.Client(cls.server.addr, timeout=5)

    def test_two_permits_of_a_semaphore(self) -> None:
        c = self.client
        slot1, slot2 = "pool/permit-1-of-2", "pool/permit-2-of-2"
        # A lease on the first permit (renewing itself), a raw second one.
        one = c.acquire("pool", ttl=0.6, limit=2, holder="w1")
        two = c.acquire_raw("pool", "w2", ttl=30, limit=2)
        three = None
        try:
            self.assertEqual(one.resource, slot1)
            self.assertEqual(two.resource, slot2)
            self.assertEqual(one.holder, "w1")

            # The same holder acquiring again gets its own permit back.
            again = c.acquire_raw("pool", "w2", ttl=30, limit=2)
            self.assertEqual((again.resource, again.token), (slot2, two.token))

            # No permit is free: a third holder that does not wait is refused,
            # and the error names the semaphore.
            with self.assertRaises(fence.LockHeldError) as held:
                c.acquire_raw("pool", "w3", ttl=30, wait=0, limit=2)
            self.assertEqual(held.exception.status, 409)
            self.assertEqual(held.exception.code, "lock_held")
            self.assertEqual(held.exception.resource, "pool")
            with self.assertRaises(fence.LockHeldError):
                c.acquire("pool", ttl=30, limit=2, holder="w3")

            # Another limit than the permits held were taken with, and a
            # slot's name acquired as a lock, are bad requests.
            with self.assertRaises(fence.BadRequestError) as bad:
                c.acquire_raw("pool", "w3", ttl=30, limit=3)
            self.assertEqual((bad.exception.status, bad.exception.code), (400, "bad_request"))
            with self.assertRaises(fence.BadRequestError):
                c.acquire("pool", ttl=30, limit=1, holder="w3")
            with self.assertRaises(fence.BadRequestError):
                c.acquire_raw(slot1, "w3", ttl=30)

            # The lease renews through its slot, past its TTL.
            first = one.expires_at
            time.sleep(1.5)
            self.assertTrue(one.held, one.error)
            self.assertGreater(one.expires_at, first)
            st = c.status(slot1)
            self.assertTrue(st.held)
            self.assertEqual((st.holder, st.token), ("w1", one.token))
            self.assertFalse(c.status("pool").held)  # the semaphore's name holds no lease

            # Writes through the lease are fenced on its slot.
            w = one.put("k", b"from w1")
            self.assertEqual((w.resource, w.fence), (slot1, one.token))
            self.assertEqual(one.get("k").value, b"from w1")
            self.assertEqual(one.claim(), one.token)
            self.assertEqual(one.fence(), one.token)
            one.txn(ops=[fence.Put(slot1, "t", b"txn")])
            self.assertEqual(c.get(slot1, "t").token, one.token)
            c.put(slot2, "k", b"from w2", two.token)

            # Transfer goes to the slot too: nobody waits for the slot itself,
            # so nothing changes and the lease goes on, renewed. (On the
            # semaphore's name the token holds nothing.)
            with self.assertRaises(fence.NotFoundError):
                one.transfer()
            self.assertTrue(one.held, one.error)
            with self.assertRaises(fence.LeaseLostError):
                c.transfer("pool", one.token)
            time.sleep(0.5)
            self.assertTrue(one.held, one.error)
            self.assertEqual(c.status(slot1).token, one.token)

            # A waiter for a permit; the lease's release (through its slot)
            # lets it in, on slot 1 with a greater token.
            got: Dict[str, Any] = {}

            def wait_for_permit() -> None:
                try:
                    got["lease"] = c.acquire_raw("pool", "w3", ttl=30, wait=10, limit=2)
                except BaseException as e:  # noqa: BLE001 - reported below
                    got["error"] = e

            waiter = threading.Thread(target=wait_for_permit)
            waiter.start()
            time.sleep(0.3)  # let it queue; it gets slot 1 either way
            one.release()
            self.assertTrue(one.done.is_set())
            self.assertFalse(one.lost.is_set())
            self.assertIsNone(one.error)
            waiter.join(15)
            self.assertNotIn("error", got)
            three = got["lease"]
            self.assertEqual(three.resource, slot1)
            self.assertEqual(three.holder, "w3")
            self.assertGreater(three.token, one.token)

            # The released permit's token is fenced on its slot...
            with self.assertRaises(fence.FencedError) as fenced:
                c.put(slot1, "k", b"stale", one.token)
            e = fenced.exception
            self.assertEqual(e.resource, slot1)
            self.assertEqual((e.presented, e.last_fence), (one.token, three.token))
            with self.assertRaises(fence.LeaseEndedError):
                one.put("k", b"stale")  # refused without being sent
            # ...while the other permit's writes go on.
            c.put(slot2, "k", b"w2 again", two.token)
            item = c.get(slot2, "k")
            self.assertEqual((item.value, item.token), (b"w2 again", two.token))
            c.put(slot1, "k", b"from w3", three.token)
            self.assertEqual(c.get(slot1, "k").value, b"from w3")
        finally:
            one.release()
            c.release(two.resource, two.token)
            if three is not None:
                c.release(three.resource, three.token)

    def test_lock_as_a_context_manager(self) -> None:
        c = self.client
        with c.lock("batch", ttl=5, limit=3, holder="x") as a, c.lock("batch", ttl=5, limit=3, holder="y") as b:
            self.assertEqual((a.resource, b.resource), ("batch/permit-1-of-3", "batch/permit-2-of-3"))
            a.put("k", "a")
            b.put("k", "b")
            self.assertEqual(c.status(a.resource).holder, "x")
        self.assertFalse(c.status("batch/permit-1-of-3").held)
        self.assertFalse(c.status("batch/permit-2-of-3").held)

    def test_limit_checked_before_sending(self) -> None:
        # Nothing listens there: a request sent would be a TransportError.
        c = fence.Client("http://127.0.0.1:%d" % free_port(), timeout=1, retries=0)
        for bad, err in ((0, ValueError), (1001, ValueError), (-1, ValueError), (1.5, TypeError), ("2", TypeError), (True, TypeError)):
            with self.subTest(limit=bad):
                with self.assertRaises(err) as cm:
                    c.acquire_raw("pool", "h", limit=bad)  # type: ignore[arg-type]
                self.assertIn("limit", str(cm.exception))
                self.assertIn("1..1000", str(cm.exception))
                with self.assertRaises(err):
                    c.acquire("pool", limit=bad)  # type: ignore[arg-type]
                with self.assertRaises(err):
                    with c.lock("pool", limit=bad):  # type: ignore[arg-type]
                        pass
        for good in (1, fence.MAX_LIMIT, None):
            with self.subTest(limit=good):
                with self.assertRaises(fence.TransportError):
                    c.acquire_raw("pool", "h", limit=good)

    def test_requests_name_the_slot_as_one_segment(self) -> None:
        lease = {"resource": "jobs/permit-2-of-5", "holder": "h", "token": 7, "ttl_ms": 5000, "expires_at": "2030-01-01T00:00:00Z"}

        def answer(h: Any) -> None:
            if h.path.endswith("/release"):
                data = json.dumps({"resource": lease["resource"], "released": True}).encode()
            else:
                data = json.dumps(lease).encode()
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(data)))
            h.end_headers()
            h.wfile.write(data)

        with FakeServer(default=answer) as fake:
            c = fence.Client(fake.addr, timeout=5, retries=0)
            l = c.acquire("jobs", ttl=5, limit=5, holder="h")
            self.assertEqual(l.resource, "jobs/permit-2-of-5")
            l.release()
            c.acquire_raw("jobs", "h", ttl=5)
            reqs = [(m, p, json.loads(b) if b else None) for m, p, _, b in fake.requests]
        self.assertEqual(reqs[0][:2], ("POST", "/v1/locks/jobs/acquire"))
        self.assertEqual(reqs[0][2], {"holder": "h", "ttl_ms": 5000, "wait_ms": 0, "limit": 5})
        paths = [p for _, p, _ in reqs[1:-1]]
        self.assertTrue(paths and paths[-1] == "/v1/locks/jobs%2Fpermit-2-of-5/release", paths)
        for p in paths[:-1]:  # a renewal, if the keepalive ran before the release
            self.assertEqual(p, "/v1/locks/jobs%2Fpermit-2-of-5/renew")
        self.assertEqual(reqs[-1][:2], ("POST", "/v1/locks/jobs/acquire"))
        self.assertNotIn("limit", reqs[-1][2])  # without a limit, none is sent

    def test_slow_acquire_renews_and_releases_the_slot(self) -> None:
        lease = {"resource": "jobs/permit-2-of-5", "holder": "h", "token": 7, "ttl_ms": 1000, "expires_at": "2030-01-01T00:00:00Z"}
        lost = {"type": "urn:fence:problem:lease_lost", "title": "t", "status": 409, "detail": "d", "code": "lease_lost",
                "resource": "jobs/permit-2-of-5", "presented": 7, "current": 8}

        def answer(h: Any) -> None:
            status, body, ctype = 200, {"resource": lease["resource"], "released": True}, "application/json"
            if h.path.endswith("/acquire"):
                time.sleep(0.2)  # longer than the margin, 0.1 s
                body = lease
            elif h.path.endswith("/renew"):
                status, body, ctype = 409, lost, "application/problem+json"
            data = json.dumps(body).encode()
            h.send_response(status)
            h.send_header("Content-Type", ctype)
            h.send_header("Content-Length", str(len(data)))
            h.end_headers()
            h.wfile.write(data)

        with FakeServer(default=answer) as fake:
            c = fence.Client(fake.addr, timeout=5, retries=0)
            with self.assertRaises(fence.LeaseLostError):
                c.acquire("jobs", ttl=1, limit=5, holder="h")
            calls = [(m, p) for m, p, _, _ in fake.requests]
        self.assertEqual(
            calls,
            [
                ("POST", "/v1/locks/jobs/acquire"),
                ("POST", "/v1/locks/jobs%2Fpermit-2-of-5/renew"),
                ("POST", "/v1/locks/jobs%2Fpermit-2-of-5/release"),
            ],
        )


if __name__ == "__main__":
    unittest.main()
