// Sessions, against a real fence server: a self-renewing lease on a session
// resource keeps the session alive, and one-off acquires in it live as long
// as it does and end when it is released.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { BadRequestError, Client, LeaseLostError, SessionEndedError, sessionResource } from "../src/index.js";
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

describe("the client's session", () => {
  test("its leases are in it by default", async () => {
    const c = new Client(srv.url, { sessionTtlMs: 600 });
    const a = await c.acquire("cs-a", { ttlMs: 600 });
    const [b, d] = await c.acquireAll(["cs-b", "cs-d"], { ttlMs: 600 });
    const own = await c.acquire("cs-own", { ttlMs: 1000 });
    const keep = await c.session();
    assert.ok(keep);
    for (const l of [a, b, d]) assert.equal(l.keeper, keep);
    assert.equal(own.keeper, undefined);
    await sleep(1500); // past the TTL: only the session (and own) are renewed
    for (const name of ["cs-a", "cs-b", "cs-d", "cs-own"]) assert.equal((await c.status(name)).held, true, name);
    await c.close();
    for (const l of [a, b, d]) {
      const why = await l.done;
      assert.ok(why instanceof SessionEndedError, String(why));
      assert.equal((await c.status(l.resource)).held, false);
    }
    assert.equal(own.signal.aborted, false);
    await own.release();
    const again = await c.acquire("cs-a", { ttlMs: 600 });
    assert.ok(again.keeper && again.keeper !== keep);
    await again.release(); // the session stays open for the next acquire
    assert.equal(await c.session(), again.keeper);
    await c.close();
    assert.equal(await c.session(), undefined);
  });

  test("without sessions, every lease keeps itself alive", async () => {
    const c = new Client(srv.url, { session: false });
    const l = await c.acquire("cs-solo");
    assert.equal(l.keeper, undefined);
    assert.equal(await c.session(), undefined);
    await l.release();
  });
});
