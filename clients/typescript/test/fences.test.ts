// Listing every resource's last token and last fence (GET /v1/fences)
// against a real server: released resources are listed, pages follow.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { BadRequestError, Client, type ListedFence } from "../src/index.js";
import { startServer, type Server } from "./helpers.js";

let srv: Server;
let client: Client;

before(async () => {
  srv = await startServer();
  client = new Client(srv.url);
});
after(async () => {
  await srv?.stop();
});

describe("fences", () => {
  it("lists released resources with their last token and fence, a page at a time", async () => {
    for (const name of ["ts-fx/b", "ts-fx/a", "ts-fx/a", "ts-fx/c"]) {
      const l = await client.acquireOnce(name, { holder: "h" });
      await client.release(name, l.token);
    }
    const page = await client.fencesPage({ prefix: "ts-fx/", limit: 2 });
    assert.deepEqual(page.fences, [
      { resource: "ts-fx/a", lastToken: 2n, lastFence: 2n },
      { resource: "ts-fx/b", lastToken: 1n, lastFence: 1n },
    ]);
    assert.equal(page.next, "ts-fx/b");
    const last = await client.fencesPage({ prefix: "ts-fx/", after: page.next });
    assert.deepEqual(last.fences, [{ resource: "ts-fx/c", lastToken: 1n, lastFence: 1n }]);
    assert.equal(last.next, undefined);
    const all: ListedFence[] = [];
    for await (const f of client.fences({ prefix: "ts-fx/", limit: 1 })) all.push(f);
    assert.deepEqual(all.map((f) => f.resource), ["ts-fx/a", "ts-fx/b", "ts-fx/c"]);
    await assert.rejects(client.fencesPage({ limit: 0 }), BadRequestError);
  });
});
