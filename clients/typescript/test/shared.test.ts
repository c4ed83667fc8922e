// Shared holds (read/write locks) and cooperative revocation against a real
// server: readers share one token and renew themselves with their holder's
// name; a writer's token fences them; a holder asked to let go learns it
// from a renewal.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { BadRequestError, Client, FencedError, LeaseLostError, LockHeldError, sessionResource, type ListedLock } from "../src/index.js";
import { sleep, startServer, type Server } from "./helpers.js";

let srv: Server;
let client: Client;

before(async () => {
  srv = await startServer();
  client = new Client(srv.url);
});
after(async () => {
  await srv?.stop();
});

describe("shared holds", () => {

  it("readers share a token, and a writer fences them", async () => {
    const a = await client.acquire("ts-doc", { holder: "ra", ttlMs: 600, shared: true });
    const b = await client.acquire("ts-doc", { holder: "rb", ttlMs: 600, shared: true });
    assert.ok(a.shared && b.shared);
    assert.equal(a.token, b.token);
    await sleep(1000); // past the TTL: both renew themselves, naming their holder
    const st = await client.status("ts-doc");
    assert.equal(st.shared, true);
    assert.deepEqual(st.holders, ["ra", "rb"]);
    assert.equal(st.holder, undefined);
    await a.put("k", "a");
    await assert.rejects(client.acquireOnce("ts-doc", { holder: "w" }), LockHeldError);
    await assert.rejects(client.acquireOnce("ts-doc", { holder: "ra" }), BadRequestError); // an upgrade is refused
    await assert.rejects(client.renew("ts-doc", a.token), BadRequestError); // the group's token names no holder
    const writer = client.acquireOnce("ts-doc", { holder: "w", waitMs: 10_000 });
    await a.release();
    await b.release();
    const w = await writer;
    assert.ok(w.token > a.token);
    assert.equal(w.shared, undefined);
    await assert.rejects(client.put("ts-doc", "k", "stale reader", a.token), FencedError);
    const d = await client.acquireOnce("ts-doc", { holder: "w", shared: true }); // the writer downgrades
    assert.equal(d.shared, true);
    assert.ok(d.token > w.token);
    await client.release("ts-doc", d.token, { holder: "w" });
    assert.equal((await client.status("ts-doc")).held, false);
  });

  it("a holder asked to let go learns it", async () => {
    const lease = await client.acquire("ts-asked", { holder: "h", ttlMs: 600 });
    try {
      const asked = await client.askToRelease("ts-asked", 30_000);
      assert.ok(asked);
      assert.equal(asked.token, lease.token);
      assert.equal(asked.holder, "h");
      const at = await Promise.race([lease.revokeRequested, new Promise<undefined>((r) => setTimeout(() => r(undefined), 5000))]);
      assert.ok(at, "the lease never learnt that it was asked to let go");
      assert.equal(at.getTime(), asked.revokeAt.getTime());
      assert.equal((await client.status("ts-asked")).revokeAt?.getTime(), asked.revokeAt.getTime());
    } finally {
      await lease.release();
    }
    assert.equal(await client.askToRelease("ts-free", 1000), undefined); // free: revoked at once
    assert.ok((await client.fence("ts-free")) > 0n);
  });

  it("a lease in the client's session learns it from the session's renewals, and that it was revoked", async () => {
    const c = new Client(srv.url, { sessionTtlMs: 600 });
    const lease = await c.acquire("ts-asked-in", { holder: "h", ttlMs: 600 });
    const other = await c.acquire("ts-asked-other", { holder: "h", ttlMs: 600 });
    try {
      assert.ok(lease.keeper !== undefined, "the lease is in no session");
      const asked = await client.askToRelease("ts-asked-in", 1000);
      assert.ok(asked);
      const at = await Promise.race([lease.revokeRequested, new Promise<undefined>((r) => setTimeout(() => r(undefined), 5000))]);
      assert.ok(at, "the lease in a session never learnt that it was asked to let go");
      assert.equal(at.getTime(), asked.revokeAt.getTime());
      const reason = await Promise.race([lease.done, new Promise<undefined>((r) => setTimeout(() => r(undefined), 10_000))]);
      assert.ok(reason instanceof LeaseLostError, `want LeaseLostError once revoked at the deadline, got ${reason}`);
      assert.equal(reason.resource, "ts-asked-in");
      assert.equal(reason.presented, lease.token);
      assert.equal(other.err, undefined, "the other lease in the session ended too");
    } finally {
      await other.release();
      await c.close();
    }
  });
});

describe("listing and status", () => {

  it("show a shared group, a lease in a session and a lease asked to let go", async () => {
    const g = await client.acquireOnce("ts-meta/shared", { holder: "rb", ttlMs: 60_000, shared: true });
    await client.acquireOnce("ts-meta/shared", { holder: "ra", ttlMs: 60_000, shared: true });
    const keep = await client.acquireOnce(sessionResource("ts-meta"), { holder: "s", ttlMs: 60_000 });
    const inside = await client.acquireOnce("ts-meta/in", { holder: "s", session: keep });
    const mine = await client.acquireOnce("ts-meta/mine", { holder: "h", ttlMs: 60_000 });
    const plain = await client.acquireOnce("ts-meta/plain", { holder: "p", ttlMs: 60_000 });
    try {
      const asked = await client.askToRelease("ts-meta/mine", 60_000);
      assert.ok(asked);
      const ref = { resource: keep.resource, token: keep.token };
      const by = new Map<string, ListedLock>();
      for await (const l of client.list({ prefix: "ts-meta/" })) by.set(l.resource, l);
      assert.deepEqual([...by.keys()], ["ts-meta/in", "ts-meta/mine", "ts-meta/plain", "ts-meta/shared"]);
      const sh = by.get("ts-meta/shared")!;
      assert.equal(sh.shared, true);
      assert.deepEqual(sh.holders, ["ra", "rb"]);
      assert.equal(sh.holder, "");
      assert.equal(sh.token, g.token);
      assert.equal(sh.session, undefined);
      assert.equal(sh.revokeAt, undefined);
      const inl = by.get("ts-meta/in")!;
      assert.deepEqual(inl.session, ref);
      assert.equal(inl.token, inside.token);
      assert.equal(inl.shared, undefined);
      assert.equal(inl.holders, undefined);
      assert.equal(inl.revokeAt, undefined);
      const ml = by.get("ts-meta/mine")!;
      assert.equal(ml.revokeAt?.getTime(), asked.revokeAt.getTime());
      assert.equal(ml.session, undefined);
      const pl = by.get("ts-meta/plain")!;
      assert.deepEqual([pl.holder, pl.token, pl.shared, pl.holders, pl.session, pl.revokeAt], ["p", plain.token, undefined, undefined, undefined, undefined]);

      const sst = await client.status("ts-meta/shared");
      assert.deepEqual([sst.shared, sst.holders, sst.holder, sst.session], [true, ["ra", "rb"], undefined, undefined]);
      const ist = await client.status("ts-meta/in");
      assert.equal(ist.holder, "s");
      assert.deepEqual(ist.session, ref);
      assert.equal(ist.revokeAt, undefined);
      const mst = await client.status("ts-meta/mine");
      assert.equal(mst.revokeAt?.getTime(), asked.revokeAt.getTime());
      assert.equal(mst.session, undefined);
      assert.equal((await client.status("ts-meta/never")).session, undefined);
    } finally {
      await client.release("ts-meta/shared", g.token, { holder: "ra" });
      await client.release("ts-meta/shared", g.token, { holder: "rb" });
      await client.release(keep.resource, keep.token);
      await client.release("ts-meta/mine", mine.token);
      await client.release("ts-meta/plain", plain.token);
    }
  });
});

describe("multi-acquire", () => {

  it("takes all or none", async () => {
    const [a, b] = await client.acquireAll(["ts-m-a", "ts-m-b"], { holder: "m", ttlMs: 600 });
    try {
      assert.deepEqual([a.resource, b.resource], ["ts-m-a", "ts-m-b"]);
      await sleep(1000); // past the TTL: each renews itself
      assert.ok(!a.signal.aborted && !b.signal.aborted);
      await assert.rejects(client.acquireAllOnce(["ts-m-c", "ts-m-b"], { holder: "other" }), (e: unknown) => e instanceof LockHeldError && e.resource === "ts-m-b");
      assert.equal((await client.status("ts-m-c")).held, false); // the refused multi-acquire holds nothing
    } finally {
      await a.release();
      await b.release();
    }
    await assert.rejects(client.acquireAllOnce(["x", "x"], { holder: "m" }), RangeError);
  });
});
