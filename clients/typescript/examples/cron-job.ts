// A cron-style job under a lock: run it from cron on every machine, and each
// run does the work only if no other instance is doing it now. The lease
// renews itself while the job runs; if it is lost (this process froze, the
// network went away), the signal aborts and the job stops, and the job's
// writes, stamped with the lease's token, are rejected once a newer holder
// exists.
//
//   FENCE_ADDR=http://127.0.0.1:7700 node dist/examples/cron-job.js

import { pathToFileURL } from "node:url";
import { Client, LockHeldError, NotFoundError, withLock } from "@fence-lock/client";

/** Runs the nightly report once, unless another instance holds the lock. */
export async function nightlyReport(client: Client, log: (line: string) => void = console.log): Promise<"done" | "skipped"> {
  try {
    return await withLock(client, "cron/nightly-report", { ttlMs: 10_000 }, async (lease, signal) => {
      const last = await lease.get("last-run").then(
        (item) => item.text(),
        (e: unknown) => (e instanceof NotFoundError ? "never" : Promise.reject(e)),
      );
      log(`holding cron/nightly-report with token ${lease.token}; last run: ${last}`);
      for (const step of ["collect", "aggregate", "publish"]) {
        signal.throwIfAborted(); // the lease is gone: stop before the next step
        await new Promise((r) => setTimeout(r, 50)); // the step's work
        await lease.put(`steps/${step}`, new Date().toISOString()); // carries the token
      }
      await lease.put("last-run", new Date().toISOString());
      return "done" as const;
    });
  } catch (e) {
    if (e instanceof LockHeldError) {
      log(`another instance is running it (its lease ends in ${e.retryAfterMs} ms): skipped`);
      return "skipped";
    }
    throw e;
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const client = new Client(process.env.FENCE_ADDR ?? "http://127.0.0.1:7700", { authToken: process.env.FENCE_AUTH_TOKEN });
  console.log(await nightlyReport(client));
}
