// Permits of a semaphore (acquire with a limit), against a real fence
// server: each is a lease on its own slot resource, which the lease renews,
// releases, transfers and writes through, and which storage fences on its own.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  BadRequestError,
  Client,
  FencedError,
  LeaseLostError,
  LeaseReleasedError,
  LockHeldError,
  MAX_LIMIT,
  NotFoundError,
  type FetchFunction,
  withLock,
} from "../src/index.js";
import { sleep, startServer, type Server } from "./helpers.js";

let srv: Server;
let client: Client;
/** Every request the client sent: "METHOD path", and its body. */
const sent: { call: string; body: string }[] = [];

before(async () => {
  srv = await startServer();
  const recording: FetchFunction = (input, init) => {
    const url = new URL(String(input));
    sent.push({ call: `${init?.method ?? "GET"} ${url.pathname}`, body: typeof init?.body === "string" ? init.body : "" });
    return fetch(input, init);
  };
  client = new Client(srv.url, { fetch: recording });
});
after(async () => {
  await srv?.stop();
});

async function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    (v) => assert.fail(`resolved with ${JSON.stringify(v, (_, x) => (typeof x === "bigint" ? String(x) : x))}`),
    (e: unknown) => e,
  );
}

describe("permits of a semaphore", () => {
  test("two permits of limit 2 on their slots; the third is held off; release lets a waiter in; the released token is fenced alone", async () => {
    const slot1 = "pool/permit-1-of-2", slot2 = "pool/permit-2-of-2";
    // A lease on the first permit (renewing itself), a raw second one.
    const one = await client.acquire("pool", { ttlMs: 600, limit: 2, holder: "w1" });
    const two = await client.acquireOnce("pool", { holder: "w2", ttlMs: 30_000, limit: 2 });
    let three: Awaited<ReturnType<Client["acquireOnce"]>> | undefined;
    try {
      assert.equal(one.resource, slot1);
      assert.equal(one.info.resource, slot1);
      assert.equal(two.resource, slot2);
      const acq = sent.find((r) => r.call === "POST /v1/locks/pool/acquire");
      assert.ok(acq, "no acquire of the semaphore was sent");
      assert.equal(JSON.parse(acq.body).limit, 2);

      // The same holder acquiring again gets its own permit back.
      const again = await client.acquireOnce("pool", { holder: "w2", ttlMs: 30_000, limit: 2 });
      assert.equal(again.resource, slot2);
      assert.equal(again.token, two.token);

      // No permit is free: a third holder that does not wait is refused, and
      // the error names the semaphore.
      const held = await rejection(client.acquireOnce("pool", { holder: "w3", ttlMs: 30_000, waitMs: 0, limit: 2 }));
      assert.ok(held instanceof LockHeldError, `want LockHeldError, got ${held}`);
      assert.equal(held.status, 409);
      assert.equal(held.code, "lock_held");
      assert.equal(held.resource, "pool");
      await assert.rejects(client.acquire("pool", { ttlMs: 30_000, limit: 2, holder: "w3" }), LockHeldError);

      // Another limit than the permits held were taken with, and a slot's name
      // acquired as a lock, are bad requests.
      const bad = await rejection(client.acquireOnce("pool", { holder: "w3", ttlMs: 30_000, limit: 3 }));
      assert.ok(bad instanceof BadRequestError, `want BadRequestError, got ${bad}`);
      assert.equal(bad.status, 400);
      assert.equal(bad.code, "bad_request");
      await assert.rejects(client.acquire("pool", { ttlMs: 30_000, limit: 1, holder: "w3" }), BadRequestError);
      await assert.rejects(client.acquireOnce(slot1, { holder: "w3", ttlMs: 30_000 }), BadRequestError);

      // The lease renews through its slot, past its TTL.
      const first = one.expiresAt;
      await sleep(1500);
      assert.equal(one.err, undefined, `the lease ended: ${one.err}`);
      assert.ok(one.expiresAt > first, "the lease was not renewed");
      const st = await client.status(slot1);
      assert.equal(st.held, true);
      assert.equal(st.holder, "w1");
      assert.equal(st.token, one.token);
      assert.equal((await client.status("pool")).held, false); // the semaphore's name holds no lease
      assert.ok(sent.some((r) => r.call === "POST /v1/locks/pool%2Fpermit-1-of-2/renew"), "no renewal of the slot was sent");

      // Writes through the lease are fenced on its slot.
      const w = await one.put("k", "from w1");
      assert.equal(w.resource, slot1);
      assert.equal(w.fence, one.token);
      assert.equal((await one.get("k")).text(), "from w1");
      assert.equal((await one.claim()).lastFence, one.token);
      assert.equal(await one.fence(), one.token);
      await one.txn({ then: [{ op: "put", resource: slot1, key: "t", value: "txn" }] });
      assert.equal((await client.get(slot1, "t")).token, one.token);
      await client.put(slot2, "k", "from w2", two.token);
      assert.ok(sent.some((r) => r.call === "PUT /v1/kv/pool%2Fpermit-1-of-2/k"));

      // Transfer goes to the slot too: nobody waits for the slot itself, so
      // nothing changes and the lease goes on, renewed. (On the semaphore's
      // name the token holds nothing.)
      await assert.rejects(one.transfer(), NotFoundError);
      assert.ok(sent.some((r) => r.call === "POST /v1/locks/pool%2Fpermit-1-of-2/transfer"));
      await assert.rejects(client.transfer("pool", one.token), LeaseLostError);
      await sleep(500);
      assert.equal(one.err, undefined, `the lease ended: ${one.err}`);
      assert.equal((await client.status(slot1)).token, one.token);

      // A waiter for a permit; the lease's release (through its slot) lets it
      // in, on slot 1 with a greater token.
      const waiting = client.acquireOnce("pool", { holder: "w3", ttlMs: 30_000, waitMs: 10_000, limit: 2 });
      await sleep(300); // let it queue; it gets slot 1 either way
      await one.release();
      const reason = await one.done;
      assert.ok(reason instanceof LeaseReleasedError, `want LeaseReleasedError, got ${reason}`);
      assert.ok(sent.some((r) => r.call === "POST /v1/locks/pool%2Fpermit-1-of-2/release"), "no release of the slot was sent");
      three = await waiting;
      assert.equal(three.resource, slot1);
      assert.equal(three.holder, "w3");
      assert.ok(three.token > one.token, `the waiter's token ${three.token} must be greater than ${one.token}`);

      // The released permit's token is fenced on its slot...
      const fenced = await rejection(client.put(slot1, "k", "stale", one.token));
      assert.ok(fenced instanceof FencedError, `want FencedError, got ${fenced}`);
      assert.equal(fenced.resource, slot1);
      assert.equal(fenced.presented, one.token);
      assert.equal(fenced.lastFence, three.token);
      await assert.rejects(one.put("k", "stale"), LeaseReleasedError); // refused without being sent
      // ...while the other permit's writes go on.
      await client.put(slot2, "k", "w2 again", two.token);
      const item = await client.get(slot2, "k");
      assert.equal(item.text(), "w2 again");
      assert.equal(item.token, two.token);
      await client.put(slot1, "k", "from w3", three.token);
      assert.equal((await client.get(slot1, "k")).text(), "from w3");

      // Nothing was ever sent to the semaphore's name but its acquires (and
      // the transfer on purpose above).
      const others = sent.filter((r) => r.call.includes("/v1/locks/pool/") && !r.call.endsWith("/acquire") && !r.call.endsWith("/pool/transfer"));
      assert.deepEqual(others, []);
    } finally {
      await one.release();
      await client.release(two.resource, two.token);
      if (three !== undefined) await client.release(three.resource, three.token);
    }
  });

  test("withLock holds a permit and releases its slot", async () => {
    const got = await withLock(client, "batch", { ttlMs: 5000, limit: 3, holder: "x" }, async (a) => {
      return withLock(client, "batch", { ttlMs: 5000, limit: 3, holder: "y" }, async (b) => {
        await a.put("k", "a");
        await b.put("k", "b");
        assert.equal((await client.status(a.resource)).holder, "x");
        return [a.resource, b.resource];
      });
    });
    assert.deepEqual(got, ["batch/permit-1-of-3", "batch/permit-2-of-3"]);
    assert.equal((await client.status("batch/permit-1-of-3")).held, false);
    assert.equal((await client.status("batch/permit-2-of-3")).held, false);
  });

  test("an acquire slower than the margin renews, and after a failed renewal releases, the slot", async () => {
    const calls: string[] = [];
    const lease = `{"resource":"jobs/permit-2-of-5","holder":"h","token":7,"ttl_ms":1000,"expires_at":"2030-01-01T00:00:00Z"}`;
    const lost = `{"type":"urn:fence:problem:lease_lost","title":"t","status":409,"detail":"d","code":"lease_lost","resource":"jobs/permit-2-of-5","presented":7,"current":8}`;
    const scripted: FetchFunction = async (input, init) => {
      const path = new URL(String(input)).pathname;
      calls.push(`${init?.method} ${path}`);
      if (path.endsWith("/acquire")) {
        await sleep(200); // longer than the margin, 100 ms
        return new Response(lease, { status: 200, headers: { "Content-Type": "application/json" } });
      }
      if (path.endsWith("/renew")) return new Response(lost, { status: 409, headers: { "Content-Type": "application/problem+json" } });
      return new Response(`{"resource":"jobs/permit-2-of-5","released":true}`, { status: 200, headers: { "Content-Type": "application/json" } });
    };
    const c = new Client("http://fence.test:7700", { fetch: scripted, retryForMs: 0 });
    await assert.rejects(c.acquire("jobs", { ttlMs: 1000, limit: 5, holder: "h" }), LeaseLostError);
    assert.deepEqual(calls, [
      "POST /v1/locks/jobs/acquire",
      "POST /v1/locks/jobs%2Fpermit-2-of-5/renew",
      "POST /v1/locks/jobs%2Fpermit-2-of-5/release",
    ]);
  });

  test("a limit that is not an integer in 1..1000 is refused before sending", async () => {
    let calls = 0;
    const c = new Client("http://127.0.0.1:1", {
      fetch: () => {
        calls++;
        return Promise.reject(new TypeError("fetch failed"));
      },
      retryForMs: 0,
    });
    assert.equal(MAX_LIMIT, 1000);
    const cases: [unknown, typeof TypeError | typeof RangeError][] = [
      [0, RangeError], [1001, RangeError], [-1, RangeError],
      [1.5, TypeError], [Number.NaN, TypeError], [Infinity, TypeError], ["2", TypeError], [2n, TypeError], [null, TypeError],
    ];
    for (const [limit, want] of cases) {
      const e1 = await rejection(c.acquireOnce("pool", { holder: "h", limit: limit as number }));
      assert.ok(e1 instanceof want, `limit ${String(limit)}: want ${want.name}, got ${e1}`);
      assert.match((e1 as Error).message, /limit .*1\.\.1000/);
      const e2 = await rejection(c.acquire("pool", { limit: limit as number }));
      assert.ok(e2 instanceof want, `limit ${String(limit)}: acquire: want ${want.name}, got ${e2}`);
    }
    assert.equal(calls, 0, "a request was sent");
    for (const limit of [1, MAX_LIMIT, undefined]) {
      await assert.rejects(c.acquireOnce("pool", { holder: "h", limit }));
    }
    assert.equal(calls, 3, "a valid limit was not sent");
  });
});
