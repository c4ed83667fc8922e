"""Every problem code of the server, mapped to its exception: provoked for
real where one embedded server can, as pure logic where it cannot."""

from __future__ import annotations

import http
import json
import re
import time
import unittest
from typing import Dict

import fence
from fence.errors import CODES

from .fenceserver import REPO, FenceServer, hash_token

ADMIN, READER, ORDERS = "admin-secret", "reader-secret", "orders-secret"


def server_codes() -> Dict[str, int]:
    """The problem codes in the server's Go source, and their statuses: every
    table entry of the form {err, "code", http.StatusXxx, "Title"}."""
    entry = re.compile(r'\{\s*[\w.]+,\s*"([a-z_]+)",\s*http\.Status(\w+),\s*"')
    codes: Dict[str, int] = {}
    for path in REPO.rglob("*.go"):
        rel = path.relative_to(REPO).parts
        if rel[0] in ("clients", "bench") or path.name.endswith("_test.go"):
            continue
        for code, status in entry.findall(path.read_text(encoding="utf-8", errors="replace")):
            name = re.sub(r"(?<!^)(?=[A-Z])", "_", status).upper()
            codes[code] = http.HTTPStatus[name].value
    return codes


def problem(status: int, code: str, **extra: object) -> bytes:
    body = {"type": "urn:fence:problem:" + code, "title": code, "status": status, "detail": "detail of " + code, "code": code}
    body.update(extra)
    return json.dumps(body).encode()


class CodeTableTest(unittest.TestCase):
    """Pure logic: the mapping from problem JSON to exceptions."""

    def test_every_server_code_is_mapped(self) -> None:
        codes = server_codes()
        self.assertGreaterEqual(len(codes), 19, "found only %s in the server's source" % sorted(codes))
        for code, status in codes.items():
            with self.subTest(code=code):
                self.assertIn(code, CODES, "server code %r has no exception class" % code)
                err = fence.problem_error(status, problem(status, code))
                self.assertIs(type(err), CODES[code])
                self.assertEqual((err.status, err.code, err.detail), (status, code, "detail of " + code))
                self.assertEqual(err.problem["code"], code)
                self.assertIn("detail of " + code, str(err))
        self.assertIn("invalid_sequencer", codes)

    def test_unprovokable_codes(self) -> None:
        cases = [
            (503, "not_leader", fence.NotLeaderError, False),
            (503, "unavailable", fence.UnavailableError, True),
            (503, "not_ready", fence.NotReadyError, True),
            (500, "internal", fence.InternalError, True),
            (403, "invalid_sequencer", fence.InvalidSequencerError, False),
        ]
        for status, code, cls, ambiguous in cases:
            with self.subTest(code=code):
                err = fence.problem_error(status, problem(status, code))
                self.assertIsInstance(err, cls)
                self.assertIsInstance(err, fence.FenceError)
                self.assertEqual(fence.is_ambiguous(err), ambiguous)

    def test_members(self) -> None:
        e = fence.problem_error(409, problem(409, "fenced", resource="r", presented=3, last_fence=fence.MAX_TOKEN))
        self.assertEqual((e.resource, e.presented, e.last_fence), ("r", 3, fence.MAX_TOKEN))
        e = fence.problem_error(409, problem(409, "token_not_issued", resource="r", presented=fence.MAX_TOKEN, last_token=4))
        self.assertEqual((e.presented, e.last_token), (fence.MAX_TOKEN, 4))
        e = fence.problem_error(409, problem(409, "lease_lost", resource="r", presented=3, current=0))
        self.assertEqual((e.presented, e.current), (3, 0))
        e = fence.problem_error(409, problem(409, "lock_held", resource="r", retry_after_ms=1500), {"Retry-After": "2"})
        self.assertEqual(e.retry_after, 1.5)
        e = fence.problem_error(409, problem(409, "lock_held", resource="r"), {"Retry-After": "2"})
        self.assertEqual(e.retry_after, 2.0)
        e = fence.problem_error(429, problem(429, "rate_limited", retry_after_ms=250))
        self.assertEqual(e.retry_after, 0.25)

    def test_unknown_and_foreign_bodies(self) -> None:
        e = fence.problem_error(418, problem(418, "teapot"))
        self.assertIs(type(e), fence.FenceError)
        self.assertEqual((e.status, e.code), (418, "teapot"))
        e = fence.problem_error(502, b"<html>Bad Gateway</html>")
        self.assertIs(type(e), fence.FenceError)
        self.assertEqual((e.status, e.code, e.detail), (502, "", "<html>Bad Gateway</html>"))
        self.assertTrue(fence.is_ambiguous(e))
        for body in (b"", b"\xff\xfe", b"[1,2]", b'{"code": 5}', b'{"code": ""}', b"null"):
            e = fence.problem_error(500, body)
            self.assertIs(type(e), fence.FenceError)

    def test_local_token_checks(self) -> None:
        for bad in (0, -1, 1 << 63, True, "5", 1.0, None):
            with self.subTest(token=bad):
                with self.assertRaises(fence.InvalidTokenError) as cm:
                    fence.check_token(bad)
                self.assertIsNone(cm.exception.status)
                self.assertFalse(fence.is_ambiguous(cm.exception))
        self.assertEqual(fence.check_token(fence.MAX_TOKEN), (1 << 63) - 1)


class ProvokedTest(unittest.TestCase):
    """Each code that one embedded server can answer, provoked for real."""

    @classmethod
    def setUpClass(cls) -> None:
        cls.server = FenceServer()
        cls.addClassCleanup(cls.server.stop)
        cls.client = fence.Client(cls.server.addr)


    def check(self, err: fence.FenceError, cls: type, status: int, code: str) -> None:
        self.assertIs(type(err), cls)
        self.assertEqual((err.status, err.code), (status, code))
        self.assertTrue(err.detail)
        self.assertEqual(err.problem.get("code"), code)
        self.assertFalse(fence.is_ambiguous(err))

    def test_fenced(self) -> None:
        c = self.client
        old = c.acquire_raw("p-fenced", "a", ttl=5)
        c.revoke("p-fenced")
        new = c.acquire_raw("p-fenced", "b", ttl=5)
        with self.assertRaises(fence.FencedError) as cm:
            c.put("p-fenced", "k", b"v", old.token)
        self.check(cm.exception, fence.FencedError, 409, "fenced")
        self.assertEqual((cm.exception.resource, cm.exception.presented, cm.exception.last_fence), ("p-fenced", old.token, new.token))
        with self.assertRaises(fence.FencedError):
            c.txn({"p-fenced": old.token}, ops=[fence.Put("p-fenced", "k", b"v")])

    def test_token_not_issued(self) -> None:
        c = self.client
        lease = c.acquire_raw("p-tni", "a", ttl=5)
        with self.assertRaises(fence.TokenNotIssuedError) as cm:
            c.put("p-tni", "k", b"v", lease.token + 1)
        self.check(cm.exception, fence.TokenNotIssuedError, 409, "token_not_issued")
        self.assertEqual((cm.exception.presented, cm.exception.last_token), (lease.token + 1, lease.token))

    def test_lock_held(self) -> None:
        c = self.client
        c.acquire_raw("p-held", "a", ttl=5)
        with self.assertRaises(fence.LockHeldError) as cm:
            c.acquire_raw("p-held", "b", ttl=5)
        self.check(cm.exception, fence.LockHeldError, 409, "lock_held")
        self.assertEqual(cm.exception.resource, "p-held")
        self.assertIsNotNone(cm.exception.retry_after)
        self.assertTrue(0 < cm.exception.retry_after <= 5, cm.exception.retry_after)
        self.assertEqual(cm.exception.headers.get("retry-after"), "5")
        t0 = time.monotonic()
        with self.assertRaises(fence.LockHeldError):
            c.acquire("p-held", ttl=5, wait=0.3)
        self.assertGreaterEqual(time.monotonic() - t0, 0.29)

    def test_lease_lost(self) -> None:
        c = self.client
        lease = c.acquire_raw("p-lost", "a", ttl=5)
        c.release("p-lost", lease.token)
        with self.assertRaises(fence.LeaseLostError) as cm:
            c.renew("p-lost", lease.token)
        self.check(cm.exception, fence.LeaseLostError, 409, "lease_lost")
        self.assertEqual((cm.exception.presented, cm.exception.current), (lease.token, 0))

    def test_fence_required(self) -> None:
        with self.assertRaises(fence.FenceRequiredError) as cm:
            self.client.request("PUT", "/v1/kv/p-fr/k", body=b"v")
        self.check(cm.exception, fence.FenceRequiredError, 428, "fence_required")
        with self.assertRaises(fence.FenceRequiredError):
            self.client.request("POST", "/v1/fences/p-fr", headers={"Fencing-Token": ""})

    def test_invalid_token(self) -> None:
        for bad in ("abc", "0", "-1", "1.5", "+5", "0x10", "1e3", "9223372036854775808", "05"):
            with self.subTest(token=bad):
                with self.assertRaises(fence.InvalidTokenError) as cm:
                    self.client.request("PUT", "/v1/kv/p-it/k", body=b"v", headers={"Fencing-Token": bad})
                self.check(cm.exception, fence.InvalidTokenError, 400, "invalid_token")
        with self.assertRaises(fence.InvalidTokenError):
            self.client.request("POST", "/v1/locks/p-it/renew", body={"token": "5"})
        # The client refuses such tokens before sending them.
        with self.assertRaises(fence.InvalidTokenError) as cm:
            self.client.put("p-it", "k", b"v", 1 << 63)
        self.assertIsNone(cm.exception.status)

    def test_precondition_failed(self) -> None:
        c = self.client
        lease = c.acquire_raw("p-pf", "a", ttl=5)
        w = c.put("p-pf", "k", b"v", lease.token)
        with self.assertRaises(fence.PreconditionFailedError) as cm:
            c.put("p-pf", "k", b"v2", lease.token, if_none_match=True)
        self.check(cm.exception, fence.PreconditionFailedError, 412, "precondition_failed")
        with self.assertRaises(fence.PreconditionFailedError):
            c.put("p-pf", "k", b"v2", lease.token, if_match=w.revision + 1000)
        with self.assertRaises(fence.PreconditionFailedError):
            c.put("p-pf", "absent", b"v2", lease.token, if_match="*")
        with self.assertRaises(fence.PreconditionFailedError):
            c.delete("p-pf", "k", lease.token, if_match=w.revision + 1000)
        self.assertEqual(c.put("p-pf", "k", b"v2", lease.token, if_match=w.revision).revision > w.revision, True)

    def test_not_found(self) -> None:
        c = self.client
        with self.assertRaises(fence.NotFoundError) as cm:
            c.get("p-nf", "missing")
        self.check(cm.exception, fence.NotFoundError, 404, "not_found")
        lease = c.acquire_raw("p-nf", "a", ttl=5)
        with self.assertRaises(fence.NotFoundError):
            c.delete("p-nf", "missing", lease.token)

    def test_bad_request(self) -> None:
        c = self.client
        with self.assertRaises(fence.BadRequestError) as cm:
            c.acquire_raw("p-br", "a", ttl=0.001)
        self.check(cm.exception, fence.BadRequestError, 400, "bad_request")
        with self.assertRaises(fence.BadRequestError):
            c.acquire_raw("p-br", "x" * 257)
        with self.assertRaises(fence.BadRequestError):
            c.request("POST", "/v1/locks/p-br/acquire", body={"holder": "a", "extra": 1})
        with self.assertRaises(fence.BadRequestError):
            c.list_locks(limit=0)
        with self.assertRaises(fence.BadRequestError):
            c.get("p-br", "a/../b")

    def test_too_large(self) -> None:
        c = self.client
        lease = c.acquire_raw("p-tl", "a", ttl=5)
        with self.assertRaises(fence.TooLargeError) as cm:
            c.put("p-tl", "k", b"x" * (1 << 20 | 1), lease.token)
        self.check(cm.exception, fence.TooLargeError, 413, "too_large")
        c.put("p-tl", "k", b"x" * (1 << 20), lease.token)  # exactly the limit

    def test_method_not_allowed(self) -> None:
        with self.assertRaises(fence.MethodNotAllowedError) as cm:
            self.client.request("DELETE", "/v1/locks")
        self.check(cm.exception, fence.MethodNotAllowedError, 405, "method_not_allowed")
        self.assertIn("GET", cm.exception.headers.get("allow", ""))


class AuthTest(unittest.TestCase):
    """unauthorized and forbidden, from a server with --auth-file."""

    @classmethod
    def setUpClass(cls) -> None:
        cls.server = FenceServer()
        cls.addClassCleanup(cls.server.stop)
        auth = cls.server.file(
            "auth",
            "# name hash grants\n"
            "admin %s lock:* write:* read:* admin:*\n"
            "reader %s read:*\n"
            "orders %s lock:orders/ write:orders/ read:orders/\n" % (hash_token(ADMIN), hash_token(READER), hash_token(ORDERS)),
        )
        cls.server.restart("--auth-file", auth)


    def test_unauthorized(self) -> None:
        for token in (None, "wrong"):
            with self.subTest(token=token):
                c = fence.Client(self.server.addr, auth_token=token)
                with self.assertRaises(fence.UnauthorizedError) as cm:
                    c.status("orders/1")
                e = cm.exception
                self.assertEqual((e.status, e.code), (401, "unauthorized"))
                self.assertIn("Bearer", e.headers.get("www-authenticate", ""))
                self.assertEqual(c.keys(), [])  # GET /v1/keys stays open

    def test_forbidden(self) -> None:
        reader = fence.Client(self.server.addr, auth_token=READER)
        self.assertFalse(reader.status("orders/1").held)
        with self.assertRaises(fence.ForbiddenError) as cm:
            reader.acquire("orders/1", ttl=5)
        self.assertEqual((cm.exception.status, cm.exception.code), (403, "forbidden"))
        orders = fence.Client(self.server.addr, auth_token=ORDERS)
        with orders.lock("orders/1", ttl=5) as lease:
            lease.put("k", b"v")
            with self.assertRaises(fence.ForbiddenError):
                orders.acquire("billing/1", ttl=5)
            with self.assertRaises(fence.ForbiddenError):
                orders.revoke("orders/1")
            with self.assertRaises(fence.ForbiddenError):
                reader.put("orders/1", "k", b"v", lease.token)
        admin = fence.Client(self.server.addr, auth_token=ADMIN)
        self.assertEqual(admin.cluster().role, "leader")


class RateLimitTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.server = FenceServer("--rate-limit", "1", "--rate-burst", "2")
        cls.addClassCleanup(cls.server.stop)


    def test_rate_limited(self) -> None:
        c = fence.Client(self.server.addr)
        with self.assertRaises(fence.RateLimitedError) as cm:
            for _ in range(10):
                c.fence("p-rl")
        e = cm.exception
        self.assertEqual((e.status, e.code), (429, "rate_limited"))
        self.assertIsNotNone(e.retry_after)
        self.assertTrue(0 < e.retry_after <= 1.0, e.retry_after)
        self.assertEqual(e.headers.get("retry-after"), "1")
        self.assertFalse(fence.is_ambiguous(e))


if __name__ == "__main__":
    unittest.main()
