// Every problem code provoked for real against fence serve, each answered as
// its error class.

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import {
  BadRequestError,
  Client,
  FenceError,
  FenceRequiredError,
  FencedError,
  ForbiddenError,
  InvalidTokenError,
  LeaseLostError,
  LockHeldError,
  MethodNotAllowedError,
  NotFoundError,
  PreconditionFailedError,
  RateLimitedError,
  TokenNotIssuedError,
  TooLargeError,
  UnauthorizedError,
  problemError,
} from "../src/index.js";
import { name, startServer, tempDir, type Server } from "./helpers.js";

let srv: Server;
let client: Client;

before(async () => {
  srv = await startServer();
  client = new Client(srv.url);
});
after(async () => {
  await srv?.stop();
});

async function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    (v) => assert.fail(`resolved with ${String(v)}`),
    (e: unknown) => e,
  );
}

/** A request outside the client, its answer mapped by problemError. */
async function raw(path: string, init: RequestInit): Promise<FenceError> {
  const res = await fetch(srv.url + path, init);
  assert.ok(res.status >= 400, `status ${res.status}`);
  return problemError(res.status, await res.text(), res.headers);
}

describe("problem codes provoked for real", () => {
  test("fenced", async () => {
    const res = name("c-fenced");
    const a = await client.acquireOnce(res, { holder: "a", ttlMs: 5000 });
    await client.revoke(res);
    const e = await rejection(client.put(res, "k", "v", a.token));
    assert.ok(e instanceof FencedError);
    assert.equal(e.status, 409);
    assert.equal(e.presented, a.token);
    assert.ok(e.lastFence > a.token);
  });

  test("token_not_issued", async () => {
    const res = name("c-notissued");
    const a = await client.acquireOnce(res, { holder: "a", ttlMs: 5000 });
    const e = await rejection(client.put(res, "k", "v", a.token + 10n));
    assert.ok(e instanceof TokenNotIssuedError);
    assert.equal(e.presented, a.token + 10n);
    assert.equal(e.lastToken, a.token);
    assert.equal(e.resource, res);
  });

  test("lock_held with a retry-after", async () => {
    const res = name("c-held");
    await client.acquireOnce(res, { holder: "a", ttlMs: 4000 });
    const e = await rejection(client.acquireOnce(res, { holder: "b", ttlMs: 4000 }));
    assert.ok(e instanceof LockHeldError);
    assert.ok(e.retryAfterMs > 3000 && e.retryAfterMs <= 4000, `retryAfterMs ${e.retryAfterMs}`);
    // The same through a raw request, with the Retry-After header.
    const r = await fetch(`${srv.url}/v1/locks/${res}/acquire`, { method: "POST", body: '{"holder":"c"}' });
    assert.equal(r.status, 409);
    assert.ok(Number(r.headers.get("Retry-After")) >= 1);
  });

  test("lease_lost", async () => {
    const res = name("c-lost");
    const a = await client.acquireOnce(res, { holder: "a", ttlMs: 5000 });
    await client.release(res, a.token);
    const e = await rejection(client.renew(res, a.token));
    assert.ok(e instanceof LeaseLostError);
    assert.equal(e.presented, a.token);
    assert.equal(e.current, 0n);
    await assert.rejects(client.release(res, a.token), LeaseLostError);
  });

  test("rate_limited", async () => {
    const s = await startServer({ args: ["--rate-limit", "1", "--rate-burst", "1"] });
    try {
      const c = new Client(s.url);
      let err: unknown;
      for (let i = 0; i < 5 && err === undefined; i++) {
        err = await c.fence("r").then(() => undefined, (e: unknown) => e);
      }
      assert.ok(err instanceof RateLimitedError, `want RateLimitedError, got ${err}`);
      assert.equal(err.status, 429);
      assert.ok(err.retryAfterMs > 0);
    } finally {
      await s.stop();
    }
  });

  test("fence_required and invalid_token, by raw requests", async () => {
    const res = name("c-raw");
    const fr = await raw(`/v1/kv/${res}/k`, { method: "PUT", body: "v" });
    assert.ok(fr instanceof FenceRequiredError);
    assert.equal(fr.status, 428);
    for (const bad of ["abc", "0", "-1", "1.5", "+5", "0x10", "1e3", "9223372036854775808"]) {
      const it = await raw(`/v1/kv/${res}/k`, { method: "PUT", body: "v", headers: { "Fencing-Token": bad } });
      assert.ok(it instanceof InvalidTokenError, `${bad}: ${it.constructor.name}`);
      assert.equal(it.status, 400);
    }
    const txn = await raw(`/v1/txn`, { method: "POST", body: `{"fences":{"${res}":"5"},"if":[],"then":[]}` });
    assert.ok(txn instanceof InvalidTokenError);
  });

  test("the client refuses tokens that are not tokens before sending", async () => {
    for (const bad of [0, -1, 1.5, Number.NaN, 2 ** 53, 0n, -1n, 9223372036854775808n]) {
      await assert.rejects(client.put("r", "k", "v", bad as never), (e: unknown) => e instanceof RangeError || e instanceof TypeError, String(bad));
    }
    await assert.rejects(client.put("r", "k", "v", "5" as never), TypeError);
  });

  test("precondition_failed", async () => {
    const res = name("c-pre");
    const a = await client.acquireOnce(res, { holder: "a", ttlMs: 5000 });
    const w = await client.put(res, "k", "v1", a.token, { ifNoneMatch: "*" });
    await assert.rejects(client.put(res, "k", "v2", a.token, { ifNoneMatch: "*" }), PreconditionFailedError);
    await assert.rejects(client.put(res, "k", "v2", a.token, { ifMatch: w.revision + 1n }), PreconditionFailedError);
    await assert.rejects(client.put(res, "missing", "v2", a.token, { ifMatch: "*" }), PreconditionFailedError);
    const ok = await client.put(res, "k", "v2", a.token, { ifMatch: w.revision });
    assert.ok(ok.revision > w.revision);
    await assert.rejects(client.delete(res, "k", a.token, { ifMatch: w.revision }), PreconditionFailedError);
    await assert.rejects(
      client.txn({ fences: { [res]: a.token }, if: [{ resource: res, key: "k", revision: 0 }], then: [{ op: "put", resource: res, key: "k", value: "x" }] }),
      PreconditionFailedError,
    );
    assert.equal((await client.get(res, "k")).text(), "v2");
  });

  test("not_found", async () => {
    const e = await rejection(client.get(name("c-nf"), "nothing/here"));
    assert.ok(e instanceof NotFoundError);
    assert.equal(e.status, 404);
    const res = name("c-nf2");
    const a = await client.acquireOnce(res, { holder: "a", ttlMs: 5000 });
    await assert.rejects(client.delete(res, "nothing", a.token), NotFoundError);
  });

  test("bad_request", async () => {
    const e = await rejection(client.acquireOnce(name("c-bad"), { holder: "a", ttlMs: 1 }));
    assert.ok(e instanceof BadRequestError);
    assert.equal(e.status, 400);
    await assert.rejects(client.get("r", "a//b"), BadRequestError);
    // "." and ".." segments would be resolved by the URL parser: refused before sending.
    await assert.rejects(client.get("r", "a/../b"), TypeError);
    await assert.rejects(client.acquire("..", { ttlMs: 1000 }), TypeError);
    await assert.rejects(client.listPage({ limit: 5000 }), BadRequestError);
  });

  test("too_large", async () => {
    const res = name("c-large");
    const a = await client.acquireOnce(res, { holder: "a", ttlMs: 5000 });
    const e = await rejection(client.put(res, "k", new Uint8Array(1024 * 1024 + 1), a.token));
    assert.ok(e instanceof TooLargeError, `want TooLargeError, got ${e}`);
    assert.equal(e.status, 413);
    await client.put(res, "k", new Uint8Array(1024 * 1024), a.token); // the limit itself is fine
  });

  test("method_not_allowed, by a raw request", async () => {
    const e = await raw(`/v1/kv/r/k`, { method: "PATCH", body: "x" });
    assert.ok(e instanceof MethodNotAllowedError);
    assert.equal(e.status, 405);
  });

  test("unauthorized and forbidden", async () => {
    const dir = tempDir("fence-auth-");
    const file = join(dir, "auth");
    const hash = (t: string) => createHash("sha256").update(t).digest("hex");
    writeFileSync(file, [
      "# test tokens",
      `ops ${hash("ops-secret")} lock:* write:* read:* admin:*`,
      `reader ${hash("read-secret")} read:*`,
      "",
    ].join("\n"));
    const s = await startServer({ args: ["--auth-file", file] });
    try {
      const anon = new Client(s.url);
      const e = await rejection(anon.status("r"));
      assert.ok(e instanceof UnauthorizedError);
      assert.equal(e.status, 401);
      await assert.rejects(new Client(s.url, { authToken: "wrong" }).status("r"), UnauthorizedError);
      const reader = new Client(s.url, { authToken: "read-secret" });
      assert.equal((await reader.status("r")).held, false);
      const f = await rejection(reader.acquire("r", { ttlMs: 1000 }));
      assert.ok(f instanceof ForbiddenError);
      assert.equal(f.status, 403);
      await assert.rejects(reader.revoke("r"), ForbiddenError);
      const ops = new Client(s.url, { authToken: "ops-secret" });
      const lease = await ops.acquire("r", { ttlMs: 2000 });
      await lease.put("k", "v");
      assert.equal((await reader.get("r", "k")).text(), "v");
      await lease.release();
      // GET /v1/keys stays open.
      assert.deepEqual(await anon.keys(), []);
    } finally {
      await s.stop();
    }
  });
});
