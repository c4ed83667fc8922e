"""Shared holds (read/write locks), cooperative revocation and
multi-acquire, against a real server: readers share one token and renew themselves with their
holder's name; a writer's token fences them; a holder asked to let go
learns it from a renewal."""

from __future__ import annotations

import threading
import time
import unittest

import fence

from .fenceserver import FenceServer


class SharedTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.server = FenceServer()
        cls.addClassCleanup(cls.server.stop)
        cls.client = fence.Client(cls.server.addr, timeout=5)

    def test_readers_share_a_token_and_a_writer_fences_them(self) -> None:
        c = self.client
        a = c.acquire("py-doc", ttl=0.6, holder="ra", shared=True)
        b = c.acquire("py-doc", ttl=0.6, holder="rb", shared=True)
        self.assertTrue(a.shared and b.shared)
        self.assertEqual(a.token, b.token)
        time.sleep(1.0)  # past the TTL: both renew themselves, naming their holder
        st = c.status("py-doc")
        self.assertTrue(st.shared)
        self.assertEqual(st.holders, ("ra", "rb"))
        self.assertIsNone(st.holder)
        a.put("k", b"a")
        with self.assertRaises(fence.LockHeldError):
            c.acquire_raw("py-doc", "w")
        with self.assertRaises(fence.BadRequestError):
            c.acquire_raw("py-doc", "ra")  # an upgrade is refused
        with self.assertRaises(fence.BadRequestError):
            c.renew("py-doc", a.token)  # the group's token names no holder
        got: list = []
        t = threading.Thread(target=lambda: got.append(c.acquire_raw("py-doc", "w", wait=10)))
        t.start()
        a.release()
        b.release()
        t.join()
        self.assertGreater(got[0].token, a.token)
        self.assertFalse(got[0].shared)
        with self.assertRaises(fence.FencedError):
            c.put("py-doc", "k", b"stale reader", a.token)
        # The writer downgrades: a new token, shared.
        d = c.acquire_raw("py-doc", "w", shared=True)
        self.assertTrue(d.shared)
        self.assertGreater(d.token, got[0].token)
        c.release("py-doc", d.token, holder="w")
        self.assertFalse(c.status("py-doc").held)

    def test_asked_to_release(self) -> None:
        c = self.client
        lease = c.acquire("py-asked", ttl=0.6, holder="h")
        try:
            asked = c.ask_to_release("py-asked", 30)
            self.assertIsNotNone(asked)
            assert asked is not None
            self.assertEqual(asked.token, lease.token)
            self.assertEqual(asked.holder, "h")
            self.assertTrue(lease.revoke_requested.wait(5), "the lease never learnt that it was asked to let go")
            self.assertEqual(lease.revoke_at, asked.revoke_at)
            self.assertEqual(c.status("py-asked").revoke_at, asked.revoke_at)
        finally:
            lease.release()
        self.assertIsNone(c.ask_to_release("py-free", 1))  # free: revoked at once
        self.assertGreater(c.fence("py-free"), 0)

    def test_asked_to_release_in_a_session(self) -> None:
        # A lease in the client's session renews nothing of its own: the
        # session's renewals tell it, and that it was revoked at the deadline.
        c = fence.Client(self.server.addr, timeout=5, session_ttl=0.6)
        self.addCleanup(c.close)
        lease = c.acquire("py-asked-in", ttl=0.6, holder="h")
        other = c.acquire("py-asked-other", ttl=0.6, holder="h")
        self.assertIsNotNone(lease.keeper, "the lease is in no session")
        asked = self.client.ask_to_release("py-asked-in", 1)
        assert asked is not None
        self.assertTrue(lease.revoke_requested.wait(5), "the lease in a session never learnt that it was asked to let go")
        self.assertEqual(lease.revoke_at, asked.revoke_at)
        self.assertTrue(lease.done.wait(10), "the lease in a session never learnt that it was revoked at the deadline")
        self.assertTrue(lease.lost.is_set())
        self.assertIsInstance(lease.error, fence.LeaseLostError)
        assert isinstance(lease.error, fence.LeaseLostError)
        self.assertEqual((lease.error.resource, lease.error.presented), ("py-asked-in", lease.token))
        self.assertFalse(other.done.is_set(), "the other lease in the session ended too")
        other.release()

    def test_multi_acquire_all_or_none(self) -> None:
        c = self.client
        a, b = c.acquire_all(["py-m-a", "py-m-b"], ttl=0.6, holder="m")
        try:
            self.assertEqual((a.resource, b.resource), ("py-m-a", "py-m-b"))
            time.sleep(1.0)  # past the TTL: each renews itself
            self.assertTrue(a.held and b.held)
            with self.assertRaises(fence.LockHeldError) as cm:
                c.acquire_all_raw(["py-m-c", "py-m-b"], "other")
            self.assertEqual(cm.exception.resource, "py-m-b")
            self.assertFalse(c.status("py-m-c").held)  # the refused multi-acquire holds nothing
        finally:
            a.release()
            b.release()
        with self.assertRaises(ValueError):
            c.acquire_all_raw(["x", "x"], "m")


if __name__ == "__main__":
    unittest.main()
