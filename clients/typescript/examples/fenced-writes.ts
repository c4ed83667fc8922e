// Fenced writes to another service through the stamping fetch: lease.fetch
// adds "Fencing-Token: <token>" (and "Fence-Sequencer" when the lock service
// signs) to every POST, PUT, PATCH and DELETE, so that a service that checks
// tokens rejects this holder as soon as a newer one exists. Here the other
// service is fence's own fenced storage, which answers a stale token 409
// fenced; any service with fence's middleware answers the same way.
//
//   FENCE_ADDR=http://127.0.0.1:7700 node dist/examples/fenced-writes.js

import { pathToFileURL } from "node:url";
import { Client, FencedError, problemError } from "@fence-lock/client";

/** Writes body to the report through lease.fetch; returns the token it was written with. */
export async function publishReport(client: Client, serviceURL: string, body: string, headers: Record<string, string> = {}): Promise<bigint> {
  const lease = await client.acquire("reports/daily", { ttlMs: 5000 });
  try {
    const res = await lease.fetch(`${serviceURL}/v1/kv/reports%2Fdaily/latest`, { method: "PUT", body, headers });
    if (!res.ok) {
      const err = problemError(res.status, await res.text(), res.headers);
      if (err instanceof FencedError) {
        // A newer holder exists: this one is stale and must stop.
        throw new Error(`fenced: token ${err.presented} < last fence ${err.lastFence}`, { cause: err });
      }
      throw err;
    }
    return lease.token;
  } finally {
    await lease.release();
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const addr = process.env.FENCE_ADDR ?? "http://127.0.0.1:7700";
  const client = new Client(addr, { authToken: process.env.FENCE_AUTH_TOKEN });
  const auth: Record<string, string> = process.env.FENCE_AUTH_TOKEN ? { Authorization: `Bearer ${process.env.FENCE_AUTH_TOKEN}` } : {};
  const token = await publishReport(client, addr, `report of ${new Date().toISOString()}`, auth);
  console.log(`written with token ${token}`);
}
