// Tokens past 2^53 round-trip exactly: 2^53+1 and 2^63-1 through acquire,
// renew, put, get, claim, fence, txn, status, listing, errors and the
// stamping fetch's headers. `fence bump` (run on a stopped server's data
// directory) makes the tokens that high: it sets the store's token floor, so
// each of the two tokens has a server of its own.

import assert from "node:assert/strict";
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { Client, FencedError, MAX_TOKEN, TokenNotIssuedError, PreconditionFailedError, parseJSON, stringifyJSON } from "../src/index.js";
import { fence, startServer, tempDir, type Server } from "./helpers.js";

const T53 = 2n ** 53n + 1n; // 9007199254740993: the first integer a number cannot hold
const T63 = 2n ** 63n - 1n; // 9223372036854775807: the largest token

let srv53: Server;
let srv63: Server;
let c53: Client;
let c63: Client;
const seen: IncomingHttpHeaders[] = [];
const echo = createServer((req, res) => {
  seen.push(req.headers);
  req.resume();
  req.on("end", () => res.end("ok"));
});
let echoURL = "";
const R53 = "big-53";
const R63 = "big-63";

// bumped starts a server whose next grant of resource is the token next:
// one grant, then a bump that sets the floor to next-1.
async function bumped(resource: string, next: bigint): Promise<Server> {
  const data = tempDir("fence-big-");
  const s = await startServer({ dataDir: data });
  const c = new Client(s.url);
  const l = await c.acquireOnce(resource, { holder: "setup", ttlMs: 1000 });
  assert.equal(l.token, 1n);
  await c.release(resource, l.token);
  await s.stop();
  fence("bump", "--data", data, "--by", (next - 2n).toString());
  return startServer({ dataDir: data });
}

before(async () => {
  await new Promise<void>((r) => echo.listen(0, "127.0.0.1", r));
  echoURL = `http://127.0.0.1:${(echo.address() as AddressInfo).port}/orders`;
  srv53 = await bumped(R53, T53);
  srv63 = await bumped(R63, T63);
  c53 = new Client(srv53.url);
  c63 = new Client(srv63.url);
});
after(async () => {
  echo.close();
  await srv53?.stop();
  await srv63?.stop();
});

describe("tokens as bigint at the boundary", () => {
  test("lossless JSON: the literals of those members stay exact both ways", () => {
    const v = parseJSON(`{"token":9223372036854775807,"last_fence":9007199254740993,"ttl_ms":5}`, { bigints: ["token", "last_fence"] });
    assert.deepEqual(v, { token: T63, last_fence: T53, ttl_ms: 5 });
    assert.equal(stringifyJSON({ token: T63, n: 1, s: "x" }), `{"token":9223372036854775807,"n":1,"s":"x"}`);
    assert.equal(JSON.parse(`{"token":9007199254740993}`).token, 9007199254740992, "JSON.parse alone rounds");
  });

  test("acquire, renew, put, get, claim, fence, txn, status and errors carry 2^53+1 and 2^63-1 exactly", async () => {
    const a53 = await c53.acquire(R53, { holder: "w53", ttlMs: 1500 });
    const a63 = await c63.acquire(R63, { holder: "w63", ttlMs: 1500 });
    try {
      assert.equal(a53.token, T53);
      assert.equal(a63.token, T63);
      assert.equal(a63.token, MAX_TOKEN);
      // Renewals send the token back: still held after several TTLs.
      await new Promise((r) => setTimeout(r, 1200));
      assert.equal(a53.err, undefined);
      assert.equal(a63.err, undefined);
      const renewed = await c63.renew(R63, T63, { ttlMs: 5000 });
      assert.equal(renewed.token, T63);

      const st = await c63.status(R63);
      assert.equal(st.token, T63);
      assert.equal(st.lastToken, T63);

      // The revision was bumped too: it is at 2^63-3 on srv63, so two writes
      // reach 2^63-1; at 2^53-1 on srv53.
      const w = await a63.put("k", "v63");
      assert.equal(w.fence, T63);
      assert.equal(w.revision, 2n ** 63n - 2n);

      const cl = await a53.claim();
      assert.equal(cl.lastFence, T53);
      assert.equal(await c53.fence(R53), T53);
      assert.equal(await c63.fence(R63), T63);

      const rev = await c63.txn({
        fences: { [R63]: T63 },
        if: [{ resource: R63, key: "k", revision: w.revision }],
        then: [{ op: "put", resource: R63, key: "k2", value: new Uint8Array([0, 1, 2]) }],
      });
      assert.equal(rev, T63);
      const rev53 = await c53.txn({ fences: { [R53]: T53 }, then: [{ op: "put", resource: R53, key: "k", value: "v53" }] });
      assert.equal(rev53, 2n ** 53n);

      const g63 = await c63.get(R63, "k");
      assert.equal(g63.token, T63);
      assert.equal(g63.revision, 2n ** 63n - 2n);
      const g53 = await c53.get(R53, "k");
      assert.equal(g53.token, T53);
      assert.equal(g53.revision, 2n ** 53n);
      assert.equal(g53.text(), "v53");
      assert.deepEqual([...(await c63.get(R63, "k2")).value], [0, 1, 2]);

      // Rejections quote the tokens exactly.
      const f = await c53.put(R53, "k", "stale", T53 - 1n).catch((e: unknown) => e);
      assert.ok(f instanceof FencedError);
      assert.equal(f.presented, T53 - 1n);
      assert.equal(f.lastFence, T53);
      const n = await c53.put(R53, "k", "forged", T53 + 1n).catch((e: unknown) => e);
      assert.ok(n instanceof TokenNotIssuedError);
      assert.equal(n.presented, T53 + 1n);
      assert.equal(n.lastToken, T53);
      await assert.rejects(a63.put("k", "x", { ifMatch: T63 }), PreconditionFailedError);

      // The stamping fetch puts them in the headers of requests to other services.
      await a63.fetch(echoURL, { method: "POST", body: "x" });
      await a53.fetch(new Request(echoURL, { method: "PUT", body: "y", headers: { "X-Other": "kept" } }));
      await a63.fetch(echoURL); // a GET: not stamped
      assert.equal(seen[0]["fencing-token"], "9223372036854775807");
      assert.equal(seen[1]["fencing-token"], "9007199254740993");
      assert.equal(seen[1]["x-other"], "kept");
      assert.equal(seen[2]["fencing-token"], undefined);

      // The listing too.
      const listed = new Map<string, bigint>();
      for (const c of [c53, c63]) for await (const l of c.list({ prefix: "big-" })) listed.set(l.resource, l.token);
      assert.equal(listed.get(R53), T53);
      assert.equal(listed.get(R63), T63);
    } finally {
      await a53.release();
      await a63.release();
    }
  });
});
