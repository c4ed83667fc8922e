// Listing with pagination, and watching across a cut connection and a
// server restart, against a real fence server behind a loopback TCP proxy
// that the test cuts.

import assert from "node:assert/strict";
import { createServer, type Server as NetServer, type Socket, connect } from "node:net";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { BadRequestError, Client, FencedError, type WatchEvent, type Watcher } from "../src/index.js";
import { name, startServer, type Server } from "./helpers.js";

/** A TCP proxy on a loopback port to target, whose connections the test can cut. */
class Proxy {
  target: string;
  refusing = false;
  readonly sockets = new Set<Socket>();
  readonly server: NetServer;
  connections = 0;
  constructor(target: string) {
    this.target = target;
    this.server = createServer((down) => {
      if (this.refusing) {
        down.destroy();
        return;
      }
      this.connections++;
      const [host, port] = this.target.split(":");
      const up = connect(Number(port), host);
      this.sockets.add(down);
      this.sockets.add(up);
      const drop = () => {
        down.destroy();
        up.destroy();
        this.sockets.delete(down);
        this.sockets.delete(up);
      };
      down.on("error", drop).on("close", drop);
      up.on("error", drop).on("close", drop);
      down.pipe(up);
      up.pipe(down);
    });
  }
  async listen(): Promise<string> {
    await new Promise<void>((r) => this.server.listen(0, "127.0.0.1", r));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }
  /** Cuts every connection, and refuses new ones until restore. */
  cut(): void {
    this.refusing = true;
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
  }
  restore(): void {
    this.refusing = false;
  }
  close(): void {
    this.cut();
    this.server.close();
  }
}

let srv: Server;
let client: Client;

before(async () => {
  srv = await startServer();
  client = new Client(srv.url);
});
after(async () => {
  await srv?.stop();
});

/** Reads events from w until n of them match keep; fails after ms. */
async function take(w: Watcher, n: number, keep: (e: WatchEvent) => boolean, ms = 15_000): Promise<WatchEvent[]> {
  const out: WatchEvent[] = [];
  const timer = setTimeout(() => w.close(), ms);
  try {
    while (out.length < n) {
      const r = await w.next();
      if (r.done) assert.fail(`the watch ended after ${out.length} of ${n} events: ${JSON.stringify(out.map((e) => e.type))}`);
      if (keep(r.value)) out.push(r.value);
    }
  } finally {
    clearTimeout(timer);
  }
  return out;
}

describe("listing", () => {
  test("pages through every lock held under a prefix, in byte order, with waiters", async () => {
    const prefix = name("ls") + "/";
    const names = ["b", "a", "c/1", "c/0", "d", "e", "f"].map((n) => prefix + n);
    const leases = await Promise.all(names.map((r) => client.acquireOnce(r, { holder: "h", ttlMs: 10_000 })));
    await client.acquireOnce(name("other"), { holder: "h", ttlMs: 10_000 }); // outside the prefix
    // One acquire waits on the first lock.
    const ac = new AbortController();
    const waiting = client.acquireOnce(prefix + "a", { holder: "w", ttlMs: 1000, waitMs: 5000, signal: ac.signal }).catch(() => undefined);
    await new Promise((r) => setTimeout(r, 200));

    const sorted = [...names].sort((x, y) => (Buffer.compare(Buffer.from(x), Buffer.from(y))));
    const p1 = await client.listPage({ prefix, limit: 3 });
    assert.deepEqual(p1.locks.map((l) => l.resource), sorted.slice(0, 3));
    assert.equal(p1.next, sorted[2]);
    const p2 = await client.listPage({ prefix, limit: 3, after: p1.next });
    assert.deepEqual(p2.locks.map((l) => l.resource), sorted.slice(3, 6));
    const p3 = await client.listPage({ prefix, limit: 3, after: p2.next });
    assert.deepEqual(p3.locks.map((l) => l.resource), sorted.slice(6));
    assert.equal(p3.next, undefined);

    const all = [];
    for await (const l of client.list({ prefix, limit: 2 })) all.push(l);
    assert.deepEqual(all.map((l) => l.resource), sorted);
    const a = all.find((l) => l.resource === prefix + "a")!;
    assert.equal(a.waiters, 1);
    assert.equal(a.holder, "h");
    assert.equal(a.token, leases[1].token);
    assert.ok(a.expiresAt instanceof Date && a.expiresAt.getTime() > Date.now());
    ac.abort();
    await waiting;
    await assert.rejects(client.listPage({ prefix, limit: 0 }), BadRequestError);
  });
});

describe("watching", () => {
  test("events made while the connection is cut arrive after the reconnect; a restarted server's stream starts with lost", async () => {
    const proxy = new Proxy(srv.addr);
    const url = await proxy.listen();
    const viaProxy = new Client(url);
    const prefix = name("w") + "/";
    const res = prefix + "orders";
    const w = viaProxy.watch({ prefix });
    const mine = (e: WatchEvent) => e.resource === res || e.type === "lost";
    try {
      await w.start();
      const a = await client.acquireOnce(res, { holder: "worker-a", ttlMs: 60_000 });
      const first = await take(w, 2, mine);
      assert.deepEqual(first.map((e) => e.type), ["granted", "fence_raised"]);
      assert.equal(first[0].holder, "worker-a");
      assert.equal(first[0].token, a.token);
      assert.equal(first[0].lastFence, a.token);
      assert.ok(first[0].expiresAt instanceof Date);
      assert.ok(first[0].time instanceof Date);
      assert.equal(first[1].lastFence, a.token);
      assert.match(first[0].id, /^.+-[0-9]+$/);

      // Cut the stream; while it is cut, more happens.
      proxy.cut();
      await client.release(res, a.token);
      const b = await client.acquireOnce(res, { holder: "worker-b", ttlMs: 60_000 });
      await assert.rejects(client.put(res, "total", "stale", a.token), FencedError);
      await new Promise((r) => setTimeout(r, 1500)); // the watcher tries, and is refused
      proxy.restore();

      const missed = await take(w, 4, mine);
      assert.deepEqual(missed.map((e) => e.type), ["released", "granted", "fence_raised", "write_rejected"]);
      assert.equal(missed[0].token, a.token);
      assert.equal(missed[1].holder, "worker-b");
      assert.equal(missed[1].token, b.token);
      assert.equal(missed[3].token, a.token);
      assert.equal(missed[3].lastFence, b.token);
      assert.equal(missed[3].key, "total");
      assert.equal(missed[3].op, "put");
      // In order, each after the one before.
      const seqs = [...first, ...missed].map((e) => BigInt(e.id.slice(e.id.lastIndexOf("-") + 1)));
      for (let i = 1; i < seqs.length; i++) assert.ok(seqs[i] > seqs[i - 1], `ids out of order: ${seqs}`);
      assert.ok(proxy.connections >= 2, "the watcher did not reconnect");
      assert.equal(w.lastEventId, missed[3].id);

      // Restart the server (a new stream); the watch resumes with lost.
      await srv.stop();
      srv = await startServer({ dataDir: srv.dataDir });
      client = new Client(srv.url);
      proxy.target = srv.addr;
      const [lost] = await take(w, 1, mine);
      assert.equal(lost.type, "lost");
      assert.equal(typeof lost.detail, "string");
      // And it carries on from now.
      await client.release(res, b.token);
      const [rel] = await take(w, 1, (e) => e.resource === res);
      assert.equal(rel.type, "released");
      assert.equal(rel.token, b.token);
    } finally {
      w.close();
      proxy.close();
    }
  });

  test("a malformed Last-Event-ID is a BadRequestError; breaking the loop ends the watch", async () => {
    const w = client.watch({ lastEventId: "not an id" });
    await assert.rejects(w.next(), BadRequestError);
    const res = name("w-break");
    const w2 = client.watch({ prefix: res });
    await w2.start();
    await client.acquireOnce(res, { holder: "h", ttlMs: 1000 });
    let n = 0;
    for await (const ev of w2) {
      assert.equal(ev.resource, res);
      n++;
      break;
    }
    assert.equal(n, 1);
    assert.deepEqual(await w2.next(), { done: true, value: undefined });
    // An aborted signal ends it too.
    const ac = new AbortController();
    const w3 = client.watch({ prefix: res, signal: ac.signal });
    setTimeout(() => ac.abort(), 100);
    assert.deepEqual(await w3.next(), { done: true, value: undefined });
  });

  test("the events of a shared hold say so; an exclusive lease's do not", async () => {
    const res = name("w-sh");
    const w = client.watch({ prefix: res });
    try {
      await w.start();
      const g = await client.acquireOnce(res, { holder: "ra", ttlMs: 5000, shared: true });
      await client.renew(res, g.token, { holder: "ra" });
      await client.release(res, g.token, { holder: "ra" });
      const x = await client.acquireOnce(res, { holder: "w", ttlMs: 5000 });
      await client.release(res, x.token);
      const evs = await take(w, 5, (e) => e.type !== "fence_raised");
      assert.deepEqual(evs.map((e) => [e.type, e.holder, e.shared]), [
        ["granted", "ra", true],
        ["renewed", "ra", true],
        ["released", "ra", true],
        ["granted", "w", undefined],
        ["released", "w", undefined],
      ]);
      assert.equal(evs[0].token, g.token);
      assert.equal(evs[0].data.mode, "shared");
    } finally {
      w.close();
    }
  });
});
