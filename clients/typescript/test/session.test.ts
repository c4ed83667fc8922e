// Sessions, against a real fence server: a self-renewing lease on a session
// resource keeps the session alive, and one-off acquires in it live as long
// as it does and end when it is released.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { BadRequestError, Client, LeaseLostError, sessionResource } from "../src/index.js";
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

describe("sessions", () => {
  test("leases live and end with their session", async () => {
    const keep = await client.acquire(sessionResource("ts"), { ttlMs: 600, holder: "w" });
    const a = await client.acquireOnce("ts-a", { holder: "w", session: keep });
    const b = await client.acquireOnce("ts-b", { holder: "w", session: { resource: keep.resource, token: keep.token } });
    for (const l of [a, b]) {
      assert.deepEqual(l.session, { resource: keep.resource, token: keep.token });
      assert.equal(l.ttlMs, 600);
    }
    await assert.rejects(client.renew("ts-a", a.token), BadRequestError);
    await assert.rejects(client.acquireOnce("ts-c", { holder: "w", ttlMs: 5000, session: keep }), BadRequestError);
    await sleep(2000); // more than three TTLs: only the session is renewed
    for (const l of [a, b]) {
      const st = await client.status(l.resource);
      assert.equal(st.held, true, l.resource);
      assert.equal(st.token, l.token);
    }
    await keep.release();
    for (const r of ["ts-a", "ts-b"]) assert.equal((await client.status(r)).held, false, r);
    await assert.rejects(client.acquireOnce("ts-c", { holder: "w", session: keep }), LeaseLostError);
  });

  test("not a session", async () => {
    await assert.rejects(client.acquireOnce("x", { holder: "w", session: { resource: "plain", token: 1n } }), TypeError);
  });
});
