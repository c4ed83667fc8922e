// Test helpers: a real `fence serve` on a loopback port, temporary
// directories, a seeded random number generator.

import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));

/** The repository's root: the directory above this file whose go.mod is fence's. */
export const repoRoot: string = (() => {
  for (let d = here; ; d = dirname(d)) {
    const gm = join(d, "go.mod");
    if (existsSync(gm) && readFileSync(gm, "utf8").startsWith("module github.com/fence-lock/fence")) return d;
    if (dirname(d) === d) throw new Error("test: the fence repository root (go.mod) was not found above " + here);
  }
})();

/** The package's root, clients/typescript. */
export const packageRoot: string = join(repoRoot, "clients", "typescript");

const tempDirs: string[] = [];
const children = new Set<ChildProcess>();

/** A new temporary directory, removed when the process exits. */
export function tempDir(prefix = "fence-ts-"): string {
  const d = mkdtempSync(join(tmpdir(), prefix));
  tempDirs.push(d);
  return d;
}

process.on("exit", () => {
  for (const c of children) {
    try {
      if (c.pid !== undefined) {
        process.kill(c.pid, "SIGCONT");
        process.kill(c.pid, "SIGKILL");
      }
    } catch {
      // already gone
    }
  }
  for (const d of tempDirs) rmSync(d, { recursive: true, force: true });
});

let binary: string | undefined;

/** The fence binary: $FENCE_BIN, else built once per process from the repository with go build. */
export function fenceBin(): string {
  if (binary !== undefined) return binary;
  if (process.env.FENCE_BIN) {
    binary = process.env.FENCE_BIN;
    return binary;
  }
  const out = join(tempDir("fence-bin-"), "fence");
  execFileSync("go", ["build", "-o", out, "./cmd/fence"], { cwd: repoRoot, stdio: ["ignore", "inherit", "inherit"] });
  binary = out;
  return binary;
}

/** Runs a fence subcommand to its end and returns its stdout; throws with its stderr if it fails. */
export function fence(...args: string[]): string {
  return execFileSync(fenceBin(), args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

/** A running fence server. */
export interface Server {
  /** host:port */
  addr: string;
  /** http://host:port */
  url: string;
  pid: number;
  dataDir: string;
  /** Everything the server logged so far. */
  log(): string;
  /** Stops the server (SIGTERM, then SIGKILL after 5 s) and waits for it to exit. */
  stop(): Promise<void>;
  /** Resolves when the process has exited. */
  exited: Promise<number | null>;
}

/** Options of startServer. */
export interface ServerOptions {
  /** The data directory; default a new temporary one. */
  dataDir?: string;
  /** Extra flags of fence serve. */
  args?: string[];
  /** The listen address; default 127.0.0.1:0. */
  listen?: string;
}

/**
 * Starts `fence serve --listen 127.0.0.1:0 --data DIR` and resolves once its
 * "fence serving" log line ({"msg":"fence serving","addr":...}) says where it listens.
 */
export function startServer(opts: ServerOptions = {}): Promise<Server> {
  const dataDir = opts.dataDir ?? tempDir("fence-data-");
  const args = ["serve", "--listen", opts.listen ?? "127.0.0.1:0", "--data", dataDir, "--shutdown-grace", "2s", ...(opts.args ?? [])];
  const child = spawn(fenceBin(), args, { stdio: ["ignore", "ignore", "pipe"] });
  children.add(child);
  let log = "";
  const exited = new Promise<number | null>((resolve) => {
    child.on("exit", (code) => {
      children.delete(child);
      resolve(code);
    });
  });
  return new Promise((resolve, reject) => {
    let found = false;
    const timer = setTimeout(() => {
      if (!found) {
        child.kill("SIGKILL");
        reject(new Error("test: fence serve did not start within 20s; its log:\n" + log));
      }
    }, 20_000);
    child.stderr!.setEncoding("utf8");
    child.stderr!.on("data", (chunk: string) => {
      log += chunk;
      if (found) return;
      for (const line of log.split("\n")) {
        if (!line.startsWith("{")) continue;
        let m: { msg?: string; addr?: string };
        try {
          m = JSON.parse(line);
        } catch {
          continue;
        }
        if (m.msg === "fence serving" && m.addr) {
          found = true;
          clearTimeout(timer);
          const addr = m.addr;
          resolve({
            addr,
            url: "http://" + addr,
            pid: child.pid!,
            dataDir,
            log: () => log,
            exited,
            stop: async () => {
              if (child.exitCode !== null || child.signalCode !== null) return;
              try {
                process.kill(child.pid!, "SIGCONT");
              } catch {
                // gone
              }
              child.kill("SIGTERM");
              const t = setTimeout(() => child.kill("SIGKILL"), 5000);
              await exited;
              clearTimeout(t);
            },
          });
          return;
        }
      }
    });
    child.on("exit", (code) => {
      if (!found) {
        clearTimeout(timer);
        reject(new Error(`test: fence serve exited (${code}) before serving; its log:\n${log}`));
      }
    });
  });
}

/** A seeded pseudo-random number generator (mulberry32): the same seed, the same numbers. */
export function rng(seed: number): { next(): number; int(n: number): number; pick<T>(a: readonly T[]): T } {
  let s = seed >>> 0;
  const next = () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return { next, int: (n) => Math.floor(next() * n), pick: (a) => a[Math.floor(next() * a.length)] };
}

/** Waits ms milliseconds. */
export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Waits until cond() is true, checking every 20 ms, for at most ms; throws if it never is. */
export async function until(cond: () => boolean | Promise<boolean>, ms = 10_000, what = "condition"): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`test: ${what} not met within ${ms}ms`);
    await sleep(20);
  }
}

/** A unique resource name for a test. */
let seq = 0;
export function name(prefix: string): string {
  seq++;
  return `${prefix}-${process.pid}-${seq}`;
}
