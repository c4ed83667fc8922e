// The seed's stale-holder story, and a lease lost by the local clock while
// the server is frozen, against a real fence server.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  Client,
  FencedError,
  LeaseExpiredError,
  LeaseLostError,
  LeaseReleasedError,
  LockHeldError,
  NotFoundError,
  isLost,
  withLock,
} from "../src/index.js";
import { name, sleep, startServer, until, type Server } from "./helpers.js";

let srv: Server;
let client: Client;

before(async () => {
  srv = await startServer();
  client = new Client(srv.url);
});
after(async () => {
  await srv?.stop();
});

describe("the stale holder", () => {
  test("A pauses past its TTL, B acquires and writes, A's write is fenced and B's value stands", async () => {
    const res = name("orders");
    // A: a holder that does not renew (paused: a GC pause, a stopped VM).
    const a = await client.acquireOnce(res, { holder: "worker-a", ttlMs: 300 });
    assert.equal(typeof a.token, "bigint");
    await sleep(600); // past A's TTL, without renewing

    const b = await client.acquire(res, { holder: "worker-b", ttlMs: 5000 });
    try {
      assert.ok(b.token > a.token, `B's token ${b.token} must be greater than A's ${a.token}`);
      const w = await b.put("total", "from B");
      assert.equal(w.fence, b.token);

      // A wakes up and writes with its old token.
      const err = await client.put(res, "total", "from A", a.token).then(
        () => assert.fail("A's stale write was accepted"),
        (e: unknown) => e,
      );
      assert.ok(err instanceof FencedError, `want FencedError, got ${err}`);
      assert.equal(err.status, 409);
      assert.equal(err.code, "fenced");
      assert.equal(err.resource, res);
      assert.equal(err.presented, a.token);
      assert.equal(err.lastFence, b.token);
      assert.ok(isLost(err));

      const item = await client.get(res, "total");
      assert.equal(item.text(), "from B");
      assert.equal(item.token, b.token);
      assert.equal(await client.fence(res), b.token);
    } finally {
      await b.release();
    }
  });

  test("a Lease whose process was frozen past its deadline ends itself and refuses to write", async () => {
    const res = name("frozen-client");
    const lease = await client.acquire(res, { ttlMs: 300 });
    // Freeze this process's event loop (a stop-the-world pause): no timer,
    // no renewal, for longer than the TTL.
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 700);
    const reason = await lease.done;
    assert.ok(reason instanceof LeaseExpiredError, `want LeaseExpiredError, got ${reason}`);
    assert.ok(lease.signal.aborted);
    assert.equal(lease.signal.reason, reason);
    await assert.rejects(lease.put("k", "late"), LeaseExpiredError);
    await assert.rejects(lease.fetch(srv.url + "/v1/fences/" + res, { method: "POST" }), LeaseExpiredError);
    await lease.release(); // no-op: the lease has ended
  });
});

describe("lease keepalive", () => {
  test("renews past several TTLs and releases", async () => {
    const res = name("keepalive");
    const lease = await client.acquire(res, { ttlMs: 1000 });
    const first = lease.expiresAt.getTime();
    await sleep(2500);
    assert.equal(lease.err, undefined, `lease ended: ${lease.err}`);
    assert.ok(lease.expiresAt.getTime() > first, "expiresAt did not move");
    const st = await client.status(res);
    assert.equal(st.held, true);
    assert.equal(st.token, lease.token);
    await lease.release();
    assert.ok((lease.err as unknown) instanceof LeaseReleasedError);
    assert.ok((await lease.done) instanceof LeaseReleasedError);
    assert.equal((await client.status(res)).held, false);
  });

  test("a lease_lost answer ends the lease at once", async () => {
    const res = name("revoked");
    const lease = await client.acquire(res, { ttlMs: 2000 });
    const rv = await client.revoke(res);
    assert.equal(rv.revokedToken, lease.token);
    assert.ok(rv.lastFence > lease.token);
    const reason = await lease.done;
    assert.ok(reason instanceof LeaseLostError, `want LeaseLostError, got ${reason}`);
    assert.equal(reason.presented, lease.token);
    assert.ok(isLost(reason));
  });

  test("lock_held carries retryAfterMs; waitMs waits for the release", async () => {
    const res = name("held");
    const a = await client.acquire(res, { ttlMs: 5000 });
    const err = await client.acquire(res, { ttlMs: 5000 }).catch((e: unknown) => e);
    assert.ok(err instanceof LockHeldError);
    assert.ok(err.retryAfterMs > 0 && err.retryAfterMs <= 5000, `retryAfterMs ${err.retryAfterMs}`);
    setTimeout(() => void a.release(), 200);
    const b = await client.acquire(res, { ttlMs: 5000, waitMs: 5000 });
    assert.ok(b.token > a.token);
    await b.release();
  });

  test("an acquire that waited longer than the safety margin counts its deadline from a renewal", async () => {
    const res = name("long-acquire");
    const a = await client.acquireOnce(res, { holder: "first", ttlMs: 10_000 });
    setTimeout(() => void client.release(res, a.token), 400);
    const t0 = performance.now();
    const lease = await client.acquire(res, { ttlMs: 2000, waitMs: 5000 }); // margin 200 ms < the wait
    const waited = performance.now() - t0;
    assert.ok(waited >= 350, `waited ${waited}ms`);
    // Counted from the acquire's send, the deadline would be t0 + 1800.
    assert.ok(lease.deadline >= t0 + 350 + 1800, `deadline ${lease.deadline - t0}ms after the acquire was sent`);
    assert.equal(lease.err, undefined);
    await lease.release();
  });

  test("withLock runs the work under the lease and releases it, also when the work throws", async () => {
    const res = name("withlock");
    const out = await withLock(client, res, { ttlMs: 2000 }, async (lease, signal) => {
      assert.equal(signal.aborted, false);
      await lease.put("k", "v");
      return lease.token;
    });
    assert.equal(typeof out, "bigint");
    assert.equal((await client.status(res)).held, false);
    await assert.rejects(
      withLock(client, res, { ttlMs: 2000 }, async () => {
        throw new Error("boom");
      }),
      /boom/,
    );
    assert.equal((await client.status(res)).held, false);
    // A lease lost while the work ran: the work's signal aborts, withLock throws why.
    await assert.rejects(
      withLock(client, res, { ttlMs: 2000 }, async (_lease, signal) => {
        await client.revoke(res);
        await new Promise((r) => signal.addEventListener("abort", r, { once: true }));
        assert.ok(signal.reason instanceof LeaseLostError);
      }),
      LeaseLostError,
    );
  });
});

describe("a frozen server", () => {
  test("the lease's signal aborts by the local clock before its TTL has elapsed", async () => {
    const s = await startServer();
    try {
      const c = new Client(s.url);
      // A wide safety margin leaves room for timers that run late on a busy machine.
      const ttl = 4000, margin = 1000;
      const t0 = performance.now();
      const lease = await c.acquire(name("frozen"), { ttlMs: ttl, safetyMarginMs: margin });
      assert.ok(lease.deadline >= t0 + ttl - margin - 1);
      assert.ok(lease.deadline <= performance.now() + ttl - margin);
      process.kill(s.pid, "SIGSTOP");
      let abortedAt = 0;
      lease.signal.addEventListener("abort", () => (abortedAt = performance.now()));
      try {
        await until(() => lease.signal.aborted, 2 * ttl, "lease lost");
        const elapsed = abortedAt - t0;
        assert.ok(lease.signal.reason instanceof LeaseExpiredError, `reason ${lease.signal.reason}`);
        assert.ok(elapsed < ttl, `the lease was declared lost ${elapsed.toFixed(0)}ms after the acquire was sent: not before its TTL of ${ttl}ms`);
        assert.ok(elapsed >= ttl - margin - 5, `declared lost too early: ${elapsed.toFixed(0)}ms`);
      } finally {
        process.kill(s.pid, "SIGCONT");
      }
      await lease.release();
    } finally {
      await s.stop();
    }
  });
});

describe("renewals sent to a frozen server", () => {
  test("carry their deadline on the server's clock, and none is applied after the server wakes", async () => {
    // The renewals the keepalive sends while the server is frozen wait in
    // its sockets; each carries the keepalive's deadline on the server's
    // clock (Fence-Deadline), learnt from the renewals answered before, so
    // none may hold the lease for another TTL that nobody renews.
    const s = await startServer();
    try {
      const c = new Client(s.url, { session: false });
      const res = name("frozen-renewals");
      const ttl = 1000;
      const lease = await c.acquire(res, { ttlMs: ttl });
      await sleep(ttl); // renewals answered: the client learns the server's clock
      assert.equal(lease.err, undefined);
      process.kill(s.pid, "SIGSTOP");
      let woke: number;
      try {
        await until(() => lease.signal.aborted, 2 * ttl + 1000, "lease lost");
      } finally {
        woke = Date.now();
        process.kill(s.pid, "SIGCONT");
      }
      await until(() => s.log().includes("the client had given up on this request"), 10_000, "a renewal refused for its deadline");
      for (const line of s.log().split("\n")) {
        if (!line.startsWith("{")) continue;
        const rec = JSON.parse(line) as { msg?: string; resource?: string; time?: string };
        if (rec.msg === "lock renewed" && rec.resource === res && Date.parse(rec.time!) > woke) {
          assert.fail("a renewal sent before the lease was given up was applied after the server woke: " + line);
        }
      }
      await lease.release();
    } finally {
      await s.stop();
    }
  });
});

describe("handover", () => {
  test("a lease goes to the named waiter behind another, in one change, and the old token is fenced", async () => {
    const res = name("handover");
    const old = await client.acquire(res, { holder: "old", ttlMs: 600 });
    await assert.rejects(old.transfer("nobody"), NotFoundError);
    await sleep(1500); // past the TTL: only renewals, started again, keep it
    assert.equal(old.err, undefined, `the lease ended after the refused transfer: ${old.err}`);
    const waiting = async (n: number) => (await client.listPage({ prefix: res })).locks.some((l) => l.resource === res && l.waiters === n);
    const a = client.acquire(res, { holder: "a", ttlMs: 5000, waitMs: 30_000 });
    await until(() => waiting(1), 10_000, "a waiting");
    const b = client.acquire(res, { holder: "b", ttlMs: 5000, waitMs: 30_000 });
    await until(() => waiting(2), 10_000, "b waiting");

    const next = await old.transfer("b");
    const lb = await b;
    assert.equal(next.holder, "b");
    assert.equal(next.token, lb.token);
    assert.ok(lb.token > old.token, `b's token ${lb.token} must be above ${old.token}`);
    assert.ok((old.err as Error | undefined) instanceof LeaseReleasedError, `old ended with ${old.err}`);
    await assert.rejects(client.put(res, "k", "stale", old.token), FencedError);
    await assert.rejects(old.transfer("a"), LeaseReleasedError);

    await lb.release(); // a kept its place
    const la = await a;
    assert.equal(la.holder, "a");
    await la.release();
  });
});
