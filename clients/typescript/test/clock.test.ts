// Fence-Deadline on renewals, against a scripted server whose clock is
// 100 s ahead of this process's.

import assert from "node:assert/strict";
import { createServer, type IncomingHttpHeaders, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import { Client } from "../src/index.js";

const AHEAD_MS = 100_000;

function lease(res: ServerResponse): void {
  const body = JSON.stringify({ resource: "r", holder: "h", token: 1, ttl_ms: 5000, expires_at: new Date(Date.now() + AHEAD_MS + 5000).toISOString() });
  res.writeHead(200, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body) });
  res.end(body);
}

function badRequest(res: ServerResponse): void {
  const body = JSON.stringify({ type: "urn:fence:problem:bad_request", title: "bad_request", status: 400, detail: "deadline passed", code: "bad_request" });
  res.writeHead(400, { "Content-Type": "application/problem+json", "Content-Length": Buffer.byteLength(body) });
  res.end(body);
}

test("a renewal's deadline goes on the server's clock, and is dropped when a server refuses it", async () => {
  const script = [lease, lease, badRequest, lease];
  const seen: IncomingHttpHeaders[] = [];
  const srv = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      seen.push(req.headers);
      (script.shift() ?? badRequest)(res);
    });
  });
  await new Promise<void>((resolve) => srv.listen(0, "127.0.0.1", resolve));
  try {
    const c = new Client("http://127.0.0.1:" + (srv.address() as AddressInfo).port, { session: false, retries: 0 });
    await c.renew("r", 1n); // no deadline: none sent; the answer teaches the clock
    const sent = Date.now();
    await c.renew("r", 1n, { deadline: new Date(sent + 2000) });
    await c.renew("r", 1n, { deadline: new Date(Date.now() + 2000) }); // refused: sent again without one
    assert.equal(seen.length, 4);
    assert.equal(seen[0]["fence-deadline"], undefined);
    const d = Date.parse(String(seen[1]["fence-deadline"]));
    assert.ok(Math.abs(d - (sent + 2000 + AHEAD_MS)) < 1000, `deadline ${new Date(d).toISOString()}, want about ${new Date(sent + 2000 + AHEAD_MS).toISOString()}`);
    assert.notEqual(seen[2]["fence-deadline"], undefined);
    assert.equal(seen[3]["fence-deadline"], undefined, "a refused deadline was sent again");
  } finally {
    srv.close();
  }
});
