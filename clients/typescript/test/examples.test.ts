// The README's examples, kept as examples/*.ts: they are the README's code
// blocks exactly, and they run against a real server, imported and as
// scripts.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { after, before, describe, test } from "node:test";
import { Client, isLost } from "../src/index.js";
import { nightlyReport } from "../examples/cron-job.js";
import { publishReport } from "../examples/fenced-writes.js";
import { packageRoot, startServer, type Server } from "./helpers.js";

const run = promisify(execFile);
let srv: Server;
let client: Client;

before(async () => {
  srv = await startServer();
  client = new Client(srv.url);
});
after(async () => {
  await srv?.stop();
});

describe("examples", () => {
  test("the README shows each example file exactly", () => {
    const readme = readFileSync(join(packageRoot, "README.md"), "utf8");
    for (const f of ["cron-job.ts", "fenced-writes.ts"]) {
      const src = readFileSync(join(packageRoot, "examples", f), "utf8");
      const marker = `<!-- examples/${f} -->\n\`\`\`ts\n`;
      const at = readme.indexOf(marker);
      assert.ok(at >= 0, `README.md has no block for examples/${f}`);
      const start = at + marker.length;
      const end = readme.indexOf("```\n", start);
      assert.equal(readme.slice(start, end), src, `README.md's block differs from examples/${f}`);
    }
  });

  test("cron-job: two runs at once, one does the work and one skips; the next run sees the last", async () => {
    const logs: string[] = [];
    const results = await Promise.all([nightlyReport(client, (l) => logs.push(l)), nightlyReport(client, (l) => logs.push(l))]);
    assert.deepEqual([...results].sort(), ["done", "skipped"]);
    assert.ok(logs.some((l) => l.includes("skipped")));
    const last = (await client.get("cron/nightly-report", "last-run")).text();
    assert.ok(!Number.isNaN(Date.parse(last)));
    const logs2: string[] = [];
    assert.equal(await nightlyReport(client, (l) => logs2.push(l)), "done");
    assert.ok(logs2[0].includes(`last run: ${last}`), logs2[0]);
    assert.equal((await client.status("cron/nightly-report")).held, false, "released");
  });

  test("cron-job: a lease lost while the job runs stops it", async () => {
    // Revoke the job's lease as soon as it holds it: its next write is
    // fenced, and the job stops there, before it records its run.
    const before = (await client.get("cron/nightly-report", "last-run")).text();
    const p = nightlyReport(client, () => void client.revoke("cron/nightly-report"));
    await assert.rejects(p, (e: unknown) => isLost(e));
    assert.equal((await client.get("cron/nightly-report", "last-run")).text(), before);
  });

  test("fenced-writes: the stamped PUT lands with the lease's token", async () => {
    const token = await publishReport(client, srv.url, "report 1");
    const item = await client.get("reports/daily", "latest");
    assert.equal(item.text(), "report 1");
    assert.equal(item.token, token);
  });

  test("both run as scripts", async () => {
    const env = { ...process.env, FENCE_ADDR: srv.url };
    const a = await run(process.execPath, [join(packageRoot, "dist", "examples", "cron-job.js")], { env });
    assert.match(a.stdout, /done|skipped/);
    const b = await run(process.execPath, [join(packageRoot, "dist", "examples", "fenced-writes.js")], { env });
    assert.match(b.stdout, /written with token [0-9]+/);
  });
});
