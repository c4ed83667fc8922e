"""Sessions: one keepalive for many leases. A self-renewing lease on a
session resource keeps the session alive; raw acquires in it live as long
as it does, and end when it is released."""

from __future__ import annotations

import time
import unittest

import fence

from .fenceserver import FenceServer


class SessionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.server = FenceServer()
        cls.addClassCleanup(cls.server.stop)
        cls.client = fence.Client(cls.server.addr, timeout=5)

    def test_leases_live_and_end_with_their_session(self) -> None:
        c = self.client
        keep = c.acquire(fence.session_resource("py"), ttl=0.6, holder="w")
        try:
            a = c.acquire_raw("py-a", "w", session=keep)
            b = c.acquire_raw("py-b", "w", session=fence.SessionRef(keep.resource, keep.token))
            for info in (a, b):
                self.assertEqual(info.session, fence.SessionRef(keep.resource, keep.token))
                self.assertAlmostEqual(info.ttl, 0.6)
            with self.assertRaises(fence.BadRequestError):
                c.renew("py-a", a.token)
            with self.assertRaises(fence.BadRequestError):
                c.acquire_raw("py-c", "w", ttl=5, session=keep)
            time.sleep(2.0)  # more than three TTLs: only the session is renewed
            for info in (a, b):
                st = c.status(info.resource)
                self.assertTrue(st.held)
                self.assertEqual(st.token, info.token)
        finally:
            keep.release()
        for name in ("py-a", "py-b"):
            self.assertFalse(c.status(name).held)
        with self.assertRaises(fence.LeaseLostError):
            c.acquire_raw("py-c", "w", session=keep)

    def test_not_a_session(self) -> None:
        with self.assertRaises(ValueError):
            self.client.acquire_raw("x", "w", session=fence.SessionRef("plain", 1))
        with self.assertRaises(fence.InvalidTokenError):
            self.client.acquire_raw("x", "w", session=fence.SessionRef(fence.session_resource("s"), 0))


if __name__ == "__main__":
    unittest.main()


class ClientSessionTest(unittest.TestCase):
    """The client's one session: its leases are in it by default."""

    @classmethod
    def setUpClass(cls) -> None:
        cls.server = FenceServer()
        cls.addClassCleanup(cls.server.stop)

    def test_leases_join_the_clients_session(self) -> None:
        c = fence.Client(self.server.addr, timeout=5, session_ttl=0.6)
        a = c.acquire("cs-a", ttl=0.6)
        b, d = c.acquire_all(["cs-b", "cs-d"], ttl=0.6)
        own = c.acquire("cs-own", ttl=1)
        keep = c.session
        assert keep is not None
        for lease in (a, b, d):
            self.assertIs(lease.keeper, keep)
        self.assertIsNone(own.keeper)
        time.sleep(1.5)  # past the TTL: only the session (and own) are renewed
        for name in ("cs-a", "cs-b", "cs-d", "cs-own"):
            self.assertTrue(c.status(name).held, name)
        c.close()
        for lease in (a, b, d):
            self.assertTrue(lease.done.wait(5))
            self.assertIsInstance(lease.error, fence.SessionEndedError)
            self.assertFalse(c.status(lease.resource).held)
        self.assertTrue(own.held)
        own.release()
        again = c.acquire("cs-a", ttl=0.6)
        self.assertIsNotNone(again.keeper)
        self.assertIsNot(again.keeper, keep)
        c.close()

    def test_without_session(self) -> None:
        c = fence.Client(self.server.addr, timeout=5, session=False)
        lease = c.acquire("cs-solo")
        self.assertIsNone(lease.keeper)
        self.assertIsNone(c.session)
        lease.release()
