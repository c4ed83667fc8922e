// The request path: one call, sent to the current server, retried and moved
// between servers exactly as the Go client (client.API) does it.

import { MaybeAppliedError, TransportError, problemError } from "./errors.js";

/** How long after a call began a retry may still start: longer than a leader failover takes. */
export const DEFAULT_RETRY_FOR_MS = 15_000;
/** The per-attempt timeout when ClientOptions.timeoutMs is not given. */
export const DEFAULT_TIMEOUT_MS = 30_000;
const MAX_BACKOFF_MS = 1000;
const RECENT_FAILURE_MS = 2 * MAX_BACKOFF_MS;

/** The fetch function the client sends with. */
export type FetchFunction = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

const now = (): number => globalThis.performance.now();

/** Splits and checks a list of server addresses as the Go client's NewClient does. */
export function parseAddrs(addrs: string): string[] {
  if (typeof addrs !== "string") throw new TypeError("fence: the server address must be a string");
  const list: string[] = [];
  const seen = new Set<string>();
  const entries = addrs.split(",");
  entries.forEach((raw, idx) => {
    const addr = raw.trim();
    if (addr === "") {
      if (entries.length === 1) throw new TypeError("fence: no server address: want http://host:port or https://host:port");
      throw new TypeError(`fence: server addresses ${JSON.stringify(addrs)}: entry ${idx + 1} is empty`);
    }
    let u: URL;
    try {
      u = new URL(addr);
    } catch {
      throw new TypeError(`fence: server address ${JSON.stringify(addr)}: not a URL`);
    }
    if ((u.protocol !== "http:" && u.protocol !== "https:") || u.host === "") {
      throw new TypeError(`fence: server address ${JSON.stringify(addr)}: want http://host:port or https://host:port`);
    }
    if (addr.includes("?") || addr.includes("#")) {
      throw new TypeError(`fence: server address ${JSON.stringify(addr)}: no query or fragment allowed`);
    }
    if (u.username !== "" || u.password !== "") {
      throw new TypeError(`fence: server address ${JSON.stringify(addr)}: no user or password allowed (use authToken)`);
    }
    const base = (u.protocol + "//" + u.host + u.pathname).replace(/\/+$/, "");
    if (seen.has(base)) throw new TypeError(`fence: server addresses ${JSON.stringify(addrs)}: ${JSON.stringify(addr)} is listed twice`);
    seen.add(base);
    list.push(base);
  });
  return list;
}

/** The list of servers and which one is current; shared by all calls of a client. */
export class Servers {
  readonly addrs: readonly string[];
  #cur = 0;
  #failed: number[];
  constructor(addrs: readonly string[]) {
    this.addrs = addrs;
    this.#failed = addrs.map(() => -Infinity);
  }
  current(): number {
    return this.#cur;
  }
  /** Records that the address at i failed and, if it is still current, moves on to the next. */
  fail(i: number): void {
    this.#failed[i] = now();
    if (this.#cur === i) this.#cur = (i + 1) % this.addrs.length;
  }
  failedRecently(i: number): boolean {
    return now() - this.#failed[i] < RECENT_FAILURE_MS;
  }
}

/** One API call. */
export interface Request_ {
  method: string;
  path: string; // with the query, starting with "/"
  body?: Uint8Array | string;
  headers?: Record<string, string>;
  /** Safe to repeat: resent after a transport error or a 503 whose outcome is unknown. */
  retryable: boolean;
  /** Added to the per-attempt timeout (an acquire's wait). */
  extraTimeoutMs?: number;
  signal?: AbortSignal;
  /**
   * A stream: a 2xx answer is returned with its body unread (Answer.response),
   * the per-attempt timeout covers the wait for its headers only, and the
   * body stays tied to signal.
   */
  stream?: boolean;
}

/** A 2xx answer. */
export interface Answer {
  status: number;
  headers: Headers;
  body: Uint8Array;
  /** With Request_.stream: the response, its body unread. */
  response?: Response;
}

const enum Outcome {
  Answered, // a 2xx, or an answer another attempt would not change
  Final, // the call was aborted, or the request could not be sent: no retry
  Unsent, // no connection could be made: the server got nothing
  NotLeader, // 503 not_leader: the server did nothing
  Unknown, // another transport error or 503: the request may have taken effect
}

const failed = (o: Outcome) => o === Outcome.Unsent || o === Outcome.NotLeader || o === Outcome.Unknown;
const retry = (o: Outcome, retryable: boolean) =>
  o === Outcome.Unsent || o === Outcome.NotLeader || (o === Outcome.Unknown && retryable);

/** Settings of a Transport. */
export interface TransportOptions {
  authToken?: string;
  timeoutMs: number;
  fetch: FetchFunction;
  retryForMs: number;
  retries: number;
  backoffMs: number;
}

/** Sends calls to a client's servers. */
export class Transport {
  readonly servers: Servers;
  readonly opts: TransportOptions;
  constructor(addrs: readonly string[], opts: TransportOptions) {
    this.servers = new Servers(addrs);
    this.opts = opts;
  }

  /** The headers every request carries. */
  baseHeaders(): Record<string, string> {
    return this.opts.authToken ? { Authorization: `Bearer ${this.opts.authToken}` } : {};
  }

  /** Sends req, retrying and moving between servers as the Go client does; returns a 2xx answer or throws. */
  async do(req: Request_): Promise<Answer> {
    const start = now();
    let backoff = Math.min(this.opts.backoffMs, MAX_BACKOFF_MS);
    if (!(backoff > 0)) backoff = 50;
    let waits = 0;
    let unsure: unknown = undefined; // the first error that left the outcome unknown
    for (let attempt = 0; ; attempt++) {
      const i = this.servers.current();
      const r = await this.once(this.servers.addrs[i], req);
      if (failed(r.out)) this.servers.fail(i);
      let err = r.err;
      if (r.out === Outcome.Unknown) {
        unsure ??= err;
      } else if (err !== undefined && unsure !== undefined) {
        err = new MaybeAppliedError(err, unsure);
      }
      if (err === undefined) return r.answer!;
      if (!retry(r.out, req.retryable) || (this.opts.retries >= 0 && attempt >= this.opts.retries)) throw err;
      const left = this.opts.retryForMs - (now() - start);
      if (left <= 0) throw err;
      const next = this.servers.current();
      if (next !== i && !this.servers.failedRecently(next)) continue; // another server, which may well answer: at once
      let wait = backoff;
      for (let k = 0; k < Math.min(waits, 32); k++) wait = Math.min(2 * wait, MAX_BACKOFF_MS);
      waits++;
      wait = wait / 2 + Math.random() * (wait / 2);
      await sleep(Math.min(wait, left), req.signal, err);
    }
  }

  /** Sends req once to the server at base and says what came of it. */
  private async once(base: string, req: Request_): Promise<{ answer?: Answer; err?: unknown; out: Outcome }> {
    const signal = req.signal;
    if (signal?.aborted) return { err: signal.reason, out: Outcome.Final };
    const ctrl = new AbortController();
    let timedOut = false;
    const onAbort = () => ctrl.abort(signal!.reason);
    signal?.addEventListener("abort", onAbort, { once: true });
    let streaming = false;
    const timeoutMs = this.opts.timeoutMs > 0 ? this.opts.timeoutMs + (req.extraTimeoutMs ?? 0) : 0;
    const timer = timeoutMs > 0
      ? setTimeout(() => {
        timedOut = true;
        ctrl.abort(new TransportError(`fence: ${req.method} ${req.path}: no answer within ${timeoutMs}ms`, true, undefined));
      }, timeoutMs)
      : undefined;
    const headers: Record<string, string> = { ...this.baseHeaders(), ...(req.headers ?? {}) };
    if (req.body !== undefined && !hasHeader(headers, "content-type")) headers["Content-Type"] = "application/json";
    const what = `fence: ${req.method} ${req.path}`;
    const cut = (e: unknown, reading: boolean): { err: unknown; out: Outcome } => {
      if (signal?.aborted && !timedOut) return { err: signal.reason, out: Outcome.Final };
      if (timedOut) return { err: new TransportError(`${what}: no answer within ${timeoutMs}ms`, true, e), out: Outcome.Unknown };
      if (reading) return { err: new TransportError(`${what}: reading the answer: ${msg(e)}`, true, e), out: Outcome.Unknown };
      const c = classify(e);
      if (c === "tls") return { err: new TransportError(`${what}: ${msg(e)}`, false, e), out: Outcome.Final };
      if (c === "dial") return { err: new TransportError(`${what}: ${msg(e)}`, false, e), out: Outcome.Unsent };
      if (c === "unsendable") return { err: new TransportError(`${what}: ${msg(e)}`, false, e), out: Outcome.Final };
      return { err: new TransportError(`${what}: ${msg(e)}`, true, e), out: Outcome.Unknown };
    };
    try {
      let res: Response;
      try {
        res = await this.opts.fetch(base + req.path, {
          method: req.method,
          headers,
          body: req.body as BodyInit | undefined,
          signal: ctrl.signal,
          redirect: "follow",
        });
      } catch (e) {
        return cut(e, false);
      }
      if (req.stream && res.status >= 200 && res.status <= 299) {
        streaming = true;
        return { answer: { status: res.status, headers: res.headers, body: new Uint8Array(0), response: res }, out: Outcome.Answered };
      }
      let body: Uint8Array;
      try {
        body = new Uint8Array(await res.arrayBuffer());
      } catch (e) {
        return cut(e, true);
      }
      if (res.status < 200 || res.status > 299) {
        const err = problemError(res.status, new TextDecoder().decode(body), res.headers);
        if (res.status !== 503) return { err, out: Outcome.Answered };
        if (err.code === "not_leader") return { err, out: Outcome.NotLeader };
        return { err, out: Outcome.Unknown };
      }
      return { answer: { status: res.status, headers: res.headers, body }, out: Outcome.Answered };
    } finally {
      if (timer !== undefined) clearTimeout(timer);
      if (!streaming) signal?.removeEventListener("abort", onAbort);
    }
  }
}

function hasHeader(h: Record<string, string>, name: string): boolean {
  return Object.keys(h).some((k) => k.toLowerCase() === name);
}

function msg(e: unknown): string {
  if (e instanceof Error) {
    const c = e.cause;
    if (c instanceof Error && c.message && !e.message.includes(c.message)) return `${e.message}: ${c.message}`;
    return e.message;
  }
  return String(e);
}

const DIAL_CODES = new Set([
  "ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EAI_NONAME", "EAI_FAIL", "EHOSTUNREACH", "ENETUNREACH",
  "EHOSTDOWN", "ENETDOWN", "EADDRNOTAVAIL", "UND_ERR_CONNECT_TIMEOUT",
]);

/**
 * Says what a rejection of fetch means: "dial" when no connection could be
 * made (so nothing was sent), "tls" for a TLS handshake refused for good (an
 * untrusted certificate, an alert), "unsendable" when fetch refused the
 * request before any connection, else "unknown". Node's fetch says why in
 * its error's cause chain; a browser's says nothing, so there every failure
 * is "unknown": the conservative answer.
 */
function classify(e: unknown): "dial" | "tls" | "unsendable" | "unknown" {
  const codes: string[] = [];
  const messages: string[] = [];
  const visit = (x: unknown, depth: number) => {
    if (depth > 8 || x === null || typeof x !== "object") return;
    const code = (x as { code?: unknown }).code;
    if (typeof code === "string") codes.push(code);
    const m = (x as { message?: unknown }).message;
    if (typeof m === "string") messages.push(m);
    const errs = (x as { errors?: unknown }).errors;
    if (Array.isArray(errs)) errs.forEach((y) => visit(y, depth + 1));
    visit((x as { cause?: unknown }).cause, depth + 1);
  };
  visit(e, 0);
  if (codes.some((c) => /^(CERT_|UNABLE_TO_|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|ERR_TLS_CERT_ALTNAME_INVALID|ERR_SSL_.*ALERT)/.test(c))) {
    return "tls";
  }
  if (codes.length > 0 && codes.every((c) => DIAL_CODES.has(c) || c === "ERR_INVALID_URL")) {
    return codes.some((c) => DIAL_CODES.has(c)) ? "dial" : "unsendable";
  }
  // Node's fetch refuses some requests before connecting ("bad port").
  if (messages.some((m) => m === "bad port")) return "unsendable";
  return "unknown";
}

/** Waits ms, or until signal aborts (then throws its reason, with cause the error being retried). */
function sleep(ms: number, signal: AbortSignal | undefined, retrying: unknown): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason ?? retrying);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

