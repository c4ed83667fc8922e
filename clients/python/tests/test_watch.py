"""Watching: events as they happen, a disconnect in the middle (through a
proxy the test cuts) that loses nothing, and a server restart that the
resumed watch reports as a lost event."""

from __future__ import annotations

import queue
import threading
import time
import unittest
from typing import List, Optional

import fence

from .fakes import FakeServer, Proxy
from .fenceserver import FenceServer, wait_until


class Collector:
    """Iterates a watch in a thread; the test takes events with a timeout."""

    def __init__(self, watch: fence.Watch) -> None:
        self.watch = watch
        self.q: "queue.Queue[object]" = queue.Queue()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            for ev in self.watch:
                self.q.put(ev)
        except Exception as e:  # noqa: BLE001 - handed to the test
            self.q.put(e)
        self.q.put(StopIteration())

    def next(self, timeout: float = 10.0) -> fence.Event:
        item = self.q.get(timeout=timeout)
        if isinstance(item, BaseException):
            raise item
        assert isinstance(item, fence.Event)
        return item

    def take(self, n: int, timeout: float = 10.0) -> List[fence.Event]:
        return [self.next(timeout) for _ in range(n)]

    def until(self, pred, timeout: float = 10.0) -> fence.Event:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        while True:
            ev = self.next(max(0.01, deadline - time.monotonic()))
            if pred(ev):
                return ev

    def quiet(self, seconds: float) -> Optional[fence.Event]:
        try:
            return self.next(seconds)
        except queue.Empty:
            return None

    def close(self) -> None:
        self.watch.close()
        self.thread.join(5)


def seq(ev: fence.Event) -> int:
    return int(ev.id.rsplit("-", 1)[1])


class WatchTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.server = FenceServer()
        cls.addClassCleanup(cls.server.stop)
        cls.client = fence.Client(cls.server.addr)


    def collect(self, watch: fence.Watch) -> Collector:
        col = Collector(watch)
        self.addCleanup(col.close)
        return col

    def test_events(self) -> None:
        c = self.client
        col = self.collect(c.watch(prefix="w-ev/"))
        old = c.acquire_raw("w-ev/a", "worker-a", ttl=5)
        c.acquire_raw("other", "x", ttl=5)  # another prefix: not seen
        c.put("w-ev/a", "k", b"v", old.token)
        rv = c.revoke("w-ev/a")
        with self.assertRaises(fence.FencedError):
            c.put("w-ev/a", "k", b"stale", old.token)
        new = c.acquire_raw("w-ev/a", "worker-b", ttl=5)
        c.renew("w-ev/a", new.token)
        c.release("w-ev/a", new.token)

        evs = col.take(9)
        self.assertEqual(
            [e.type for e in evs],
            ["granted", "fence_raised", "revoked", "fence_raised", "write_rejected", "granted", "fence_raised", "renewed", "released"],
        )
        g = evs[0]
        self.assertEqual((g.resource, g.holder, g.token, g.last_fence), ("w-ev/a", "worker-a", old.token, old.token))
        self.assertEqual(g.expires_at, old.expires_at)
        self.assertIsNotNone(g.time)
        self.assertEqual(g.data["type"], "granted")
        self.assertEqual((evs[2].holder, evs[2].token, evs[2].last_fence), ("worker-a", old.token, rv.last_fence))
        self.assertEqual((evs[3].token, evs[3].last_fence), (rv.last_fence, rv.last_fence))
        wr = evs[4]
        self.assertEqual((wr.token, wr.last_fence, wr.key, wr.op), (old.token, rv.last_fence, "k", "put"))
        self.assertEqual((evs[5].holder, evs[5].token), ("worker-b", new.token))
        self.assertTrue(all(e.resource == "w-ev/a" for e in evs))
        ids = [seq(e) for e in evs]
        self.assertEqual(ids, sorted(ids))
        self.assertEqual(col.watch.last_event_id, evs[-1].id)
        self.assertIsNone(col.quiet(0.3))

    def test_shared_events(self) -> None:
        # The events of a shared hold say so; an exclusive lease's do not.
        c = self.client
        col = self.collect(c.watch(prefix="w-sh/"))
        g = c.acquire_raw("w-sh/a", "ra", ttl=5, shared=True)
        c.renew("w-sh/a", g.token, holder="ra")
        c.release("w-sh/a", g.token, holder="ra")
        x = c.acquire_raw("w-sh/a", "w", ttl=5)
        c.release("w-sh/a", x.token)
        evs: List[fence.Event] = []
        while not (evs and evs[-1].type == "released" and evs[-1].holder == "w"):
            ev = col.next()
            if ev.type != "fence_raised":
                evs.append(ev)
        self.assertEqual([e.type for e in evs], ["granted", "renewed", "released", "granted", "released"])
        self.assertEqual([e.shared for e in evs], [True, True, True, False, False])
        self.assertEqual((evs[0].holder, evs[0].token), ("ra", g.token))
        self.assertEqual(evs[0].data["mode"], "shared")

    def test_disconnect_and_restart(self) -> None:
        host, port = self.server.hostport.rsplit(":", 1)
        proxy = Proxy((host, int(port)))
        self.addCleanup(proxy.close)
        c = fence.Client(proxy.addr)
        direct = self.client
        col = self.collect(c.watch(prefix="w-cut/"))

        first = direct.acquire_raw("w-cut/a", "worker-a", ttl=30)
        self.assertEqual([e.type for e in col.take(2)], ["granted", "fence_raised"])
        self.assertEqual(col.watch.connects, 1)

        # Cut the stream, keep the watch away while events are made.
        proxy.down = True
        proxy.cut()
        made = []
        for i in range(5):
            lease = direct.acquire_raw("w-cut/b%d" % i, "worker-b", ttl=30)
            made.append(lease)
        direct.put("w-cut/a", "k", b"v", first.token)  # no fence change: no event
        direct.release("w-cut/a", first.token)
        time.sleep(0.2)
        proxy.down = False

        evs = col.take(11, timeout=15)
        self.assertNotIn("lost", [e.type for e in evs])
        self.assertEqual([(e.type, e.resource) for e in evs[:10:2]], [("granted", "w-cut/b%d" % i) for i in range(5)])
        self.assertEqual([e.token for e in evs[:10:2]], [l.token for l in made])
        self.assertEqual((evs[10].type, evs[10].resource), ("released", "w-cut/a"))
        self.assertGreaterEqual(col.watch.connects, 2)
        ids = [seq(e) for e in evs]
        self.assertEqual(ids, sorted(ids))
        self.assertIsNone(col.quiet(0.3))

        # Restart the server: the resumed watch cannot resume, and says so.
        last = col.watch.last_event_id
        self.server.restart()
        host, port = self.server.hostport.rsplit(":", 1)
        proxy.upstream = (host, int(port))
        proxy.cut()
        lost = col.next(timeout=20)
        self.assertEqual(lost.type, "lost")
        self.assertTrue(lost.detail)
        self.assertNotEqual(lost.id.rsplit("-", 1)[0], last.rsplit("-", 1)[0])
        # The stream goes on from now.
        self.client = fence.Client(self.server.addr)
        type(self).client = self.client
        after = self.client.acquire_raw("w-cut/c", "worker-c", ttl=5)
        ev = col.until(lambda e: e.type == "granted")
        self.assertEqual((ev.resource, ev.token), ("w-cut/c", after.token))

    def test_resume_from_an_earlier_watch(self) -> None:
        c = self.client
        w1 = c.watch(prefix="w-res/")
        c.acquire_raw("w-res/a", "a", ttl=5)
        ev = next(w1)
        self.assertEqual(ev.type, "granted")
        w1.close()
        self.assertRaises(StopIteration, next, w1)
        c.acquire_raw("w-res/b", "b", ttl=5)
        with c.watch(prefix="w-res/", last_event_id=ev.id) as w2:
            got = [next(w2), next(w2), next(w2)]
        self.assertEqual([(e.type, e.resource) for e in got], [("fence_raised", "w-res/a"), ("granted", "w-res/b"), ("fence_raised", "w-res/b")])

    def test_bad_last_event_id(self) -> None:
        with self.assertRaises(fence.BadRequestError):
            self.client.watch(last_event_id="not an id")

    def test_close_from_another_thread(self) -> None:
        w = self.client.watch(prefix="w-close/")
        threading.Timer(0.2, w.close).start()
        t0 = time.monotonic()
        self.assertEqual(list(w), [])
        self.assertLess(time.monotonic() - t0, 3)
        self.assertTrue(w.closed)


def sse_response(chunks: List[bytes], pause: float = 0.0):  # type: ignore[no-untyped-def]
    """A FakeServer action that answers an event stream of chunks and hangs up."""

    def act(h) -> None:  # type: ignore[no-untyped-def]
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Connection", "close")
        h.end_headers()
        for ch in chunks:
            h.wfile.write(ch)
            h.wfile.flush()
            if pause:
                time.sleep(pause)
        h.close_connection = True

    return act


class WatchProtocolTest(unittest.TestCase):
    """The client side of the stream, against a scripted server."""

    def test_reconnects_with_last_event_id(self) -> None:
        stream1 = [b"retry: 50\r\n\r\nid: s-1\r", b"\nevent: granted\rdata: {\"type\":\"granted\",", b"\"resource\":\"r\",\"token\":9223372036854775807}\n\n", b"id: s-2\ndata: {\"type\":\"expired\"", b""]
        stream2 = [b": hello\n\nid: s-2\nevent: expired\ndata: {\"type\":\"expired\",\"resource\":\"r\"}\n\n"]
        with FakeServer([sse_response(stream1, 0.01), sse_response(stream2)], default=(503, b"", {})) as fake:
            c = fence.Client(fake.addr)
            w = c.watch()
            a = next(w)
            self.assertEqual((a.type, a.resource, a.token, a.id), ("granted", "r", fence.MAX_TOKEN, "s-1"))
            b = next(w)  # the unfinished s-2 of the first stream was dropped and resent
            self.assertEqual((b.type, b.id), ("expired", "s-2"))
            w.close()
            self.assertNotIn("Last-Event-ID", fake.requests[0][2])
            self.assertEqual(fake.requests[1][2].get("Last-Event-ID"), "s-1")

    def test_idle_stream_is_reconnected(self) -> None:
        def silent(h) -> None:  # type: ignore[no-untyped-def]
            sse_response([b"retry: 10\n\n"])(h)
            time.sleep(2)

        with FakeServer([silent, sse_response([b"id: x-1\ndata: {\"type\":\"renewed\"}\n\n"])]) as fake:
            w = fence.Client(fake.addr).watch(idle_timeout=0.3)
            t0 = time.monotonic()
            self.assertEqual(next(w).type, "renewed")
            self.assertLess(time.monotonic() - t0, 1.9)
            w.close()

    def test_error_answers_end_the_watch(self) -> None:
        from .fakes import problem

        with FakeServer([sse_response([b"id: s-1\ndata: {}\n\n"]), problem(401, "unauthorized")]) as fake:
            w = fence.Client(fake.addr).watch(reconnect_delay=0.01)
            self.assertEqual(next(w).id, "s-1")
            with self.assertRaises(fence.UnauthorizedError):
                next(w)
            self.assertRaises(StopIteration, next, w)

    def test_malformed_event_data(self) -> None:
        with FakeServer([sse_response([b"id: s-1\ndata: {\"type\":\"granted\"}\n\nid: s-2\ndata: [1]\n\nid: s-3\ndata: {}\n\n"])]) as fake:
            w = fence.Client(fake.addr).watch()
            self.assertEqual(next(w).id, "s-1")
            with self.assertRaises(fence.SSEError):
                next(w)
            self.assertRaises(StopIteration, next, w)

    def test_not_an_event_stream(self) -> None:
        with FakeServer([(200, b"{}", {"Content-Type": "application/json"})]) as fake:
            with self.assertRaises(fence.FenceError):
                fence.Client(fake.addr).watch()

    def test_unavailable_is_retried_on_connect(self) -> None:
        from .fakes import problem

        with FakeServer([problem(503, "unavailable"), sse_response([b"data: {\"type\":\"granted\"}\n\n"])]) as fake:
            w = fence.Client(fake.addr).watch()
            self.assertEqual(next(w).type, "granted")
            w.close()
            self.assertTrue(wait_until(lambda: len(fake.requests) == 2, 2))


if __name__ == "__main__":
    unittest.main()
