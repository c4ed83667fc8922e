// Address lists and failover, with the Go client's rules: move on after a
// transport error or a 503; resend only what is safe to repeat, or what
// certainly did not take effect; say when a write's outcome is unknown.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  Client,
  FencedError,
  MaybeAppliedError,
  NotFoundError,
  TransportError,
  UnavailableError,
  isAmbiguous,
  type FetchFunction,
} from "../src/index.js";
import { name, startServer, type Server } from "./helpers.js";

type Step = "refused" | "reset" | "hang" | "tls" | { status: number; body?: string; headers?: Record<string, string> };

/** A fetch that answers from a script, one step per attempt, and records where each attempt went. */
function scripted(steps: Step[]): { fetch: FetchFunction; calls: { url: string; method: string }[] } {
  const calls: { url: string; method: string }[] = [];
  const fetch: FetchFunction = async (input, init) => {
    calls.push({ url: String(input), method: init?.method ?? "GET" });
    const s = steps.shift() ?? { status: 200, body: "{}" };
    if (s === "refused") throw new TypeError("fetch failed", { cause: Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" }) });
    if (s === "reset") throw new TypeError("fetch failed", { cause: Object.assign(new Error("other side closed"), { code: "UND_ERR_SOCKET" }) });
    if (s === "tls") throw new TypeError("fetch failed", { cause: Object.assign(new Error("self-signed certificate"), { code: "DEPTH_ZERO_SELF_SIGNED_CERT" }) });
    if (s === "hang") {
      return new Promise((_, reject) => {
        init?.signal?.addEventListener("abort", () => reject(init.signal!.reason), { once: true });
      });
    }
    return new Response(s.body ?? "{}", { status: s.status, headers: { "Content-Type": "application/json", ...(s.headers ?? {}) } });
  };
  return { fetch, calls };
}

const problem = (code: string, status: number, extra = "") =>
  ({ status, body: `{"type":"urn:fence:problem:${code}","title":"t","status":${status},"detail":"d","code":"${code}"${extra}}`, headers: { "Content-Type": "application/problem+json" } });
const fenceOK = { status: 200, body: `{"resource":"r","last_fence":7}` };
const txnOK = { status: 200, body: `{"revision":9}` };
const A = "http://a.test:7700", B = "http://b.test:7700";

describe("address lists", () => {
  test("are checked as the Go client checks them", () => {
    const c = new Client(" http://a:1 , https://B:2/prefix/ ");
    assert.deepEqual(c.addrs, ["http://a:1", "https://b:2/prefix"]);
    assert.equal(c.current, "http://a:1");
    for (const bad of ["", "a:7700", "ftp://a", "http://a,", "http://a,,http://b", "http://a?x=1", "http://a#f", "http://a,HTTP://A", "http://u:p@a"]) {
      assert.throws(() => new Client(bad), TypeError, bad);
    }
  });
});

describe("failover and retries", () => {
  test("a read moves on after a transport error and stays on the server that answered", async () => {
    const s = scripted(["reset", fenceOK, fenceOK]);
    const c = new Client(`${A},${B}`, { fetch: s.fetch });
    assert.equal(await c.fence("r"), 7n);
    assert.equal(await c.fence("r"), 7n);
    assert.deepEqual(s.calls.map((x) => new URL(x.url).host), ["a.test:7700", "b.test:7700", "b.test:7700"]);
    assert.equal(c.current, B);
  });

  test("a delete is not resent after a transport error once connected: its outcome is unknown", async () => {
    const s = scripted(["reset", { status: 200, body: `{"resource":"r","key":"k","revision":3}` }]);
    const c = new Client(`${A},${B}`, { fetch: s.fetch });
    const e = await c.delete("r", "k", 5).catch((x: unknown) => x);
    assert.ok(e instanceof TransportError);
    assert.equal(e.sent, true);
    assert.equal(isAmbiguous(e), true);
    assert.equal(s.calls.length, 1);
    assert.equal(c.current, B, "the next call goes to the next server");
  });

  test("a txn is resent after a refused connection and after not_leader: nothing was applied", async () => {
    const s = scripted(["refused", problem("not_leader", 503), txnOK]);
    const c = new Client(`${A},${B}`, { fetch: s.fetch, backoffMs: 1 });
    assert.equal(await c.txn({ fences: { r: 5 } }), 9n);
    assert.equal(s.calls.length, 3);
    assert.ok(s.calls.every((x) => x.method === "POST"));
  });

  test("a txn answered 503 unavailable is not resent: ambiguous", async () => {
    const s = scripted([problem("unavailable", 503), txnOK]);
    const c = new Client(`${A},${B}`, { fetch: s.fetch });
    const e = await c.txn({ fences: { r: 5 } }).catch((x: unknown) => x);
    assert.ok(e instanceof UnavailableError);
    assert.equal(isAmbiguous(e), true);
    assert.equal(s.calls.length, 1);
  });

  test("a conditional put is not resent; an unconditional put is, and says when an earlier attempt may have taken effect", async () => {
    let s = scripted(["reset", { status: 200, body: `{"resource":"r","key":"k","revision":1,"fence":5}` }]);
    let c = new Client(`${A},${B}`, { fetch: s.fetch });
    await assert.rejects(c.put("r", "k", "v", 5, { ifMatch: 3 }), TransportError);
    assert.equal(s.calls.length, 1);

    s = scripted(["reset", { status: 200, body: `{"resource":"r","key":"k","revision":1,"fence":5}` }]);
    c = new Client(`${A},${B}`, { fetch: s.fetch });
    assert.equal((await c.put("r", "k", "v", 5)).revision, 1n);
    assert.equal(s.calls.length, 2);

    s = scripted(["reset", problem("fenced", 409, `,"resource":"r","presented":5,"last_fence":6`)]);
    c = new Client(`${A},${B}`, { fetch: s.fetch });
    const e = await c.put("r", "k", "v", 5).catch((x: unknown) => x);
    assert.ok(e instanceof MaybeAppliedError, `got ${e}`);
    assert.ok(e.cause instanceof FencedError);
    assert.ok(e.earlier instanceof TransportError);
    assert.equal(isAmbiguous(e), true);
  });

  test("retries stop after retryForMs, and after `retries` resends", async () => {
    const always503 = () => scripted(Array.from({ length: 1000 }, () => problem("unavailable", 503)));
    let s = always503();
    let c = new Client(`${A},${B}`, { fetch: s.fetch, retryForMs: 300, backoffMs: 10 });
    const t0 = performance.now();
    await assert.rejects(c.fence("r"), UnavailableError);
    const took = performance.now() - t0;
    assert.ok(took >= 250 && took < 2500, `took ${took}ms`);
    assert.ok(s.calls.length >= 3);

    s = always503();
    c = new Client(`${A},${B}`, { fetch: s.fetch, retries: 2 });
    await assert.rejects(c.fence("r"), UnavailableError);
    assert.equal(s.calls.length, 3);

    s = always503();
    c = new Client(`${A},${B}`, { fetch: s.fetch, retries: 0 });
    await assert.rejects(c.fence("r"), UnavailableError);
    assert.equal(s.calls.length, 1);
    assert.equal(c.current, B);
  });

  test("an answer other than 503 is final and does not move the client", async () => {
    const s = scripted([problem("not_found", 404), fenceOK]);
    const c = new Client(`${A},${B}`, { fetch: s.fetch });
    await assert.rejects(c.get("r", "k"), NotFoundError);
    assert.equal(s.calls.length, 1);
    assert.equal(c.current, A);
  });

  test("a TLS refusal is not retried", async () => {
    const s = scripted(["tls", fenceOK]);
    const c = new Client(`${A},${B}`, { fetch: s.fetch });
    const e = await c.fence("r").catch((x: unknown) => x);
    assert.ok(e instanceof TransportError);
    assert.equal(s.calls.length, 1);
  });

  test("an attempt that times out is abandoned; a read is retried elsewhere, a revoke is not", async () => {
    let s = scripted(["hang", fenceOK]);
    let c = new Client(`${A},${B}`, { fetch: s.fetch, timeoutMs: 100 });
    assert.equal(await c.fence("r"), 7n);
    assert.equal(s.calls.length, 2);

    s = scripted(["hang", { status: 200, body: `{"resource":"r","revoked_token":1,"last_fence":2}` }]);
    c = new Client(`${A},${B}`, { fetch: s.fetch, timeoutMs: 100 });
    const e = await c.revoke("r").catch((x: unknown) => x);
    assert.ok(e instanceof TransportError);
    assert.equal(isAmbiguous(e), true);
    assert.equal(s.calls.length, 1);
  });

  test("the caller's signal ends a call, its retries too", async () => {
    const s = scripted(Array.from({ length: 1000 }, () => problem("unavailable", 503)));
    const c = new Client(`${A}`, { fetch: s.fetch, backoffMs: 200 });
    const ac = new AbortController();
    setTimeout(() => ac.abort(new Error("stop")), 150);
    await assert.rejects(c.fence("r", { signal: ac.signal }), /stop/);
    const hang = scripted(["hang"]);
    const c2 = new Client(A, { fetch: hang.fetch });
    const ac2 = new AbortController();
    setTimeout(() => ac2.abort(), 50);
    await assert.rejects(c2.fence("r", { signal: ac2.signal }), (e: unknown) => (e as Error).name === "AbortError");
  });
});

describe("failover against real servers", () => {
  let srv: Server;
  before(async () => {
    srv = await startServer();
  });
  after(async () => {
    await srv?.stop();
  });

  test("cluster, status of an unknown resource, keys", async () => {
    const c = new Client(srv.url);
    const cl = await c.cluster();
    assert.equal(cl.role, "leader");
    assert.equal(cl.epoch, 1n);
    assert.equal(cl.store, "embedded");
    assert.deepEqual(cl.servers, [{ url: "", role: "leader" }]);
    const st = await c.status(name("unknown"));
    assert.equal(st.held, false);
    assert.equal(st.lastToken, 0n);
    assert.equal(st.token, undefined);
    assert.deepEqual(await c.keys(), []);
    assert.equal(await c.fence(name("unknown")), 0n);
  });

  test("a dead address first: every call, writes too, goes on to the live one", async () => {
    // A port that was just free: nothing listens there.
    const dead = await startServer();
    const deadURL = dead.url;
    await dead.stop();
    const c = new Client(`${deadURL},${srv.url}`);
    const res = name("failover");
    const lease = await c.acquire(res, { ttlMs: 2000 });
    assert.equal(c.current, srv.url);
    const c2 = new Client(`${deadURL},${srv.url}`);
    const rev = await c2.txn({ fences: { [res]: lease.token }, then: [{ op: "put", resource: res, key: "k", value: "v" }] });
    assert.equal(typeof rev, "bigint", "a txn is resent after a refused connection");
    const c3 = new Client(`${deadURL},${srv.url}`);
    await c3.delete(res, "k", lease.token);
    await lease.release();
  });
});
