"""Listing the locks held (pagination, prefix), lock status, cluster
status and keys."""

from __future__ import annotations

import threading
import unittest

import fence

from .fenceserver import FenceServer, wait_until


class ListTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.server = FenceServer()
        cls.addClassCleanup(cls.server.stop)
        cls.client = fence.Client(cls.server.addr)
        cls.names = ["ls/%s" % n for n in ("a", "b", "c", "d", "e", "f", "z", "é", "日本")]
        cls.tokens = {}
        for name in cls.names + ["lsx/1", "other"]:
            cls.tokens[name] = cls.client.acquire_raw(name, "h-" + name, ttl=60).token


    def test_pages(self) -> None:
        c = self.client
        p1 = c.list_locks(prefix="ls/", limit=4)
        self.assertEqual([l.resource for l in p1.locks], self.names[:4])
        self.assertEqual(p1.next, "ls/d")
        p2 = c.list_locks(prefix="ls/", after=p1.next, limit=4)
        self.assertEqual([l.resource for l in p2.locks], self.names[4:8])
        p3 = c.list_locks(prefix="ls/", after=p2.next, limit=4)
        self.assertEqual([l.resource for l in p3.locks], self.names[8:])
        self.assertIsNone(p3.next)
        lk = p1.locks[0]
        self.assertEqual((lk.holder, lk.token, lk.waiters), ("h-ls/a", self.tokens["ls/a"], 0))
        self.assertIsNotNone(lk.expires_at.tzinfo)

    def test_iterator_over_all_pages(self) -> None:
        got = list(self.client.locks(prefix="ls/", page_size=2))
        self.assertEqual([l.resource for l in got], self.names)  # byte order of UTF-8
        self.assertEqual([l.token for l in got], [self.tokens[n] for n in self.names])
        # A prefix is a string prefix: "ls" also matches "lsx/1".
        self.assertEqual([l.resource for l in self.client.locks(prefix="ls", page_size=3)], self.names + ["lsx/1"])
        every = [l.resource for l in self.client.locks()]
        self.assertIn("other", every)
        self.assertEqual(every, sorted(every, key=lambda s: s.encode()))
        self.assertEqual(list(self.client.locks(prefix="nothing/")), [])

    def test_waiters_and_status(self) -> None:
        c = self.client
        t = threading.Thread(target=lambda: self.assertRaises(fence.LockHeldError, c.acquire_raw, "ls/a", "waiter", 5, 1.0))
        t.start()
        self.assertTrue(wait_until(lambda: c.list_locks(prefix="ls/a", limit=1).locks[0].waiters == 1, 5))
        t.join()
        st = c.status("ls/a")
        self.assertTrue(st.held)
        self.assertEqual((st.holder, st.token, st.last_token), ("h-ls/a", self.tokens["ls/a"], self.tokens["ls/a"]))
        free = c.status("never-held")
        self.assertEqual((free.held, free.holder, free.token, free.last_token), (False, None, None, 0))

    def test_shared_session_and_asked(self) -> None:
        # A shared group, a lease in a session and a lease asked to let go:
        # the listing and the status show each as such.
        c = self.client
        g = c.acquire_raw("meta/shared", "rb", ttl=60, shared=True)
        c.acquire_raw("meta/shared", "ra", ttl=60, shared=True)
        self.addCleanup(c.release, "meta/shared", g.token, holder="rb")
        self.addCleanup(c.release, "meta/shared", g.token, holder="ra")
        keep = c.acquire_raw(fence.session_resource("meta"), "s", ttl=60)
        self.addCleanup(c.release, keep.resource, keep.token)
        ref = fence.SessionRef(keep.resource, keep.token)
        inside = c.acquire_raw("meta/in", "s", session=keep)
        mine = c.acquire_raw("meta/mine", "h", ttl=60)
        self.addCleanup(c.release, "meta/mine", mine.token)
        asked = c.ask_to_release("meta/mine", 60)
        assert asked is not None

        by = {l.resource: l for l in c.locks(prefix="meta/")}
        self.assertEqual(sorted(by), ["meta/in", "meta/mine", "meta/shared"])
        sh = by["meta/shared"]
        self.assertTrue(sh.shared)
        self.assertEqual((sh.holder, sh.holders, sh.token), ("", ("ra", "rb"), g.token))
        self.assertIsNone(sh.session)
        self.assertIsNone(sh.revoke_at)
        self.assertEqual((by["meta/in"].session, by["meta/in"].token), (ref, inside.token))
        self.assertFalse(by["meta/in"].shared)
        self.assertEqual(by["meta/in"].holders, ())
        self.assertIsNone(by["meta/in"].revoke_at)
        self.assertEqual(by["meta/mine"].revoke_at, asked.revoke_at)
        self.assertIsNone(by["meta/mine"].session)
        plain = c.list_locks(prefix="ls/a", limit=1).locks[0]
        self.assertEqual((plain.shared, plain.holders, plain.session, plain.revoke_at), (False, (), None, None))

        st = c.status("meta/shared")
        self.assertEqual((st.shared, st.holders, st.holder, st.session), (True, ("ra", "rb"), None, None))
        st = c.status("meta/in")
        self.assertEqual((st.holder, st.session, st.shared, st.revoke_at), ("s", ref, False, None))
        st = c.status("meta/mine")
        self.assertEqual((st.holder, st.revoke_at, st.session), ("h", asked.revoke_at, None))
        self.assertIsNone(c.status("never-held").session)

    def test_cluster_and_keys(self) -> None:
        cl = self.client.cluster()
        self.assertEqual((cl.role, cl.epoch, cl.store), ("leader", 1, "embedded"))
        self.assertEqual([(s.url, s.role) for s in cl.servers], [("", "leader")])
        self.assertEqual(self.client.keys(), [])
        self.assertTrue(self.client.ready())


class TokenBoundaryTest(unittest.TestCase):
    """Tokens are Python ints, exact up to 2^63-1, in headers and in JSON."""

    MAX = (1 << 63) - 1

    @classmethod
    def setUpClass(cls) -> None:
        cls.server = FenceServer()
        cls.addClassCleanup(cls.server.stop)
        cls.client = fence.Client(cls.server.addr)


    def test_max_token_round_trips_through_the_server(self) -> None:
        c = self.client
        self.assertEqual(fence.MAX_TOKEN, self.MAX)
        lease = c.acquire_raw("tok", "a", ttl=5)
        checks = [
            ("put header", lambda: c.put("tok", "k", b"v", self.MAX), fence.TokenNotIssuedError),
            ("claim header", lambda: c.claim("tok", self.MAX), fence.TokenNotIssuedError),
            ("delete header", lambda: c.delete("tok", "k", self.MAX), fence.TokenNotIssuedError),
            ("txn JSON", lambda: c.txn({"tok": self.MAX}, ops=[fence.Put("tok", "k", b"v")]), fence.TokenNotIssuedError),
            ("renew JSON", lambda: c.renew("tok", self.MAX), fence.LeaseLostError),
            ("release JSON", lambda: c.release("tok", self.MAX), fence.LeaseLostError),
        ]
        for name, call, cls in checks:
            with self.subTest(name):
                with self.assertRaises(cls) as cm:
                    call()
                self.assertEqual(cm.exception.presented, self.MAX)
                self.assertIs(type(cm.exception.presented), int)
                if cls is fence.TokenNotIssuedError:
                    self.assertEqual(cm.exception.last_token, lease.token)
                else:
                    self.assertEqual(cm.exception.current, lease.token)
        # One past it is refused by the client, and by the server.
        with self.assertRaises(fence.InvalidTokenError):
            c.put("tok", "k", b"v", self.MAX + 1)
        with self.assertRaises(fence.InvalidTokenError) as cm:
            c.request("PUT", "/v1/kv/tok/k", body=b"v", headers={"Fencing-Token": str(self.MAX + 1)})
        self.assertEqual(cm.exception.status, 400)
        with self.assertRaises(fence.InvalidTokenError):
            c.request("POST", "/v1/fences/tok", headers={"Fencing-Token": str(self.MAX + 1)})
        with self.assertRaises(fence.InvalidTokenError):
            c.request("POST", "/v1/txn", body='{"fences":{"tok":%d},"if":[],"then":[]}' % (self.MAX + 1))
        self.assertEqual(c.fence("tok"), lease.token)  # nothing raised it

    def test_max_token_is_sent_exactly(self) -> None:
        from .fakes import FakeServer

        granted = ('{"resource":"r","holder":"h","token":%d,"ttl_ms":60000,"expires_at":"2026-12-01T12:00:00.123456789Z"}' % self.MAX).encode()
        put_ok = ('{"resource":"r","key":"k","revision":%d,"fence":%d}' % (self.MAX, self.MAX)).encode()
        claim_ok = ('{"resource":"r","last_fence":%d}' % self.MAX).encode()
        with FakeServer([(200, granted, {}), (200, put_ok, {}), (200, claim_ok, {}), (200, b'{"revision":1}', {})], default=(200, b'{"resource":"r","released":true}', {})) as fake:
            c = fence.Client(fake.addr)
            lease = c.acquire("r", ttl=60, holder="h")
            self.assertEqual(lease.token, self.MAX)
            self.assertIs(type(lease.token), int)
            w = lease.put("k", b"v")
            self.assertEqual((w.revision, w.fence), (self.MAX, self.MAX))
            self.assertEqual(lease.claim(), self.MAX)
            lease.txn(ops=[fence.Delete("r", "k")])
            self.assertEqual(lease.stamp()["Fencing-Token"], "9223372036854775807")
            lease.release()
            by_path = [(m, p, h, b) for m, p, h, b in fake.requests]
            self.assertEqual(by_path[1][2]["Fencing-Token"], "9223372036854775807")
            self.assertEqual(by_path[2][2]["Fencing-Token"], "9223372036854775807")
            self.assertIn(b'"r": 9223372036854775807', by_path[3][3])
            self.assertIn(b'"token": 9223372036854775807', by_path[-1][3])


if __name__ == "__main__":
    unittest.main()


class FencesTest(unittest.TestCase):
    """Listing every resource's last token and last fence (GET /v1/fences)."""

    @classmethod
    def setUpClass(cls) -> None:
        cls.server = FenceServer()
        cls.addClassCleanup(cls.server.stop)
        cls.client = fence.Client(cls.server.addr)

    def test_released_resources_are_listed(self) -> None:
        c = self.client
        for name in ("fx/b", "fx/a", "fx/a", "fx/c"):
            lease = c.acquire_raw(name, "h", ttl=60)
            c.release(name, lease.token)
        page = c.list_fences(prefix="fx/", limit=2)
        self.assertEqual(page.fences, [fence.FenceInfo("fx/a", 2, 2), fence.FenceInfo("fx/b", 1, 1)])
        self.assertEqual(page.next, "fx/b")
        last = c.list_fences(prefix="fx/", after=page.next)
        self.assertEqual(last.fences, [fence.FenceInfo("fx/c", 1, 1)])
        self.assertIsNone(last.next)
        self.assertEqual([f.resource for f in c.fences(prefix="fx/", page_size=1)], ["fx/a", "fx/b", "fx/c"])
        self.assertEqual(list(c.fences(prefix="nothing/")), [])
        with self.assertRaises(fence.BadRequestError):
            c.list_fences(limit=0)
