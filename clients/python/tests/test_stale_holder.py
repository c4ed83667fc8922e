"""The seed's story: a holder that paused past its TTL is fenced."""

from __future__ import annotations

import time
import unittest

import fence

from .fenceserver import FenceServer


class StaleHolderTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.server = FenceServer()
        cls.addClassCleanup(cls.server.stop)
        cls.client = fence.Client(cls.server.addr)


    def test_paused_holder_is_fenced(self) -> None:
        c = self.client
        # A acquires with a short TTL and then "pauses": it never renews (a
        # raw acquire, as a process frozen by a GC pause or a stopped VM).
        a = c.acquire_raw("invoices", "worker-a", ttl=0.3)
        c.put("invoices", "total", b"100", a.token)
        time.sleep(0.5)  # past A's TTL

        # B gets the lock (a greater token) and writes.
        with c.lock("invoices", ttl=5, holder="worker-b") as b:
            self.assertGreater(b.token, a.token)
            b.put("total", b"200")

            # A wakes up and writes with its old token: rejected.
            with self.assertRaises(fence.FencedError) as cm:
                c.put("invoices", "total", b"999", a.token)
            e = cm.exception
            self.assertEqual(e.status, 409)
            self.assertEqual(e.code, "fenced")
            self.assertEqual(e.resource, "invoices")
            self.assertEqual(e.presented, a.token)
            self.assertEqual(e.last_fence, b.token)
            self.assertFalse(fence.is_ambiguous(e))
            self.assertTrue(fence.is_lost(e))

            # B's value stands, stored with B's token.
            item = c.get("invoices", "total")
            self.assertEqual(item.value, b"200")
            self.assertEqual(item.token, b.token)

            # A cannot renew or release B's lease either.
            with self.assertRaises(fence.LeaseLostError) as cm2:
                c.renew("invoices", a.token)
            self.assertEqual(cm2.exception.presented, a.token)
            self.assertEqual(cm2.exception.current, b.token)
            with self.assertRaises(fence.LeaseLostError):
                c.release("invoices", a.token)
            self.assertEqual(c.status("invoices").holder, "worker-b")

    def test_grant_fences_before_the_new_holder_writes(self) -> None:
        c = self.client
        a = c.acquire_raw("ledger", "worker-a", ttl=0.2)
        time.sleep(0.35)
        b = c.acquire_raw("ledger", "worker-b", ttl=5)
        # B has not written yet: its grant alone raised the fence.
        with self.assertRaises(fence.FencedError) as cm:
            c.delete("ledger", "anything", a.token)
        self.assertEqual((cm.exception.presented, cm.exception.last_fence), (a.token, b.token))
        with self.assertRaises(fence.FencedError):
            c.claim("ledger", a.token)
        self.assertEqual(c.fence("ledger"), b.token)
        c.release("ledger", b.token)


if __name__ == "__main__":
    unittest.main()
