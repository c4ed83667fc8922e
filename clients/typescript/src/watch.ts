// Watching: GET /v1/watch, a Server-Sent Events stream read through fetch
// (EventSource cannot send an Authorization header), reconnected with
// Last-Event-ID after every disconnect, as the Go client's Watcher does.

import type { CallOptions } from "./client.js";
import { ProtocolError, TransportError } from "./errors.js";
import { parseJSON, type JSONValue } from "./json.js";
import { SSEParser, type SSEEvent } from "./sse.js";
import type { Transport } from "./transport.js";

/** The members of an event's data that are tokens, read as bigint. */
const EVENT_BIGINTS: ReadonlySet<string> = new Set(["token", "last_fence", "revision", "last_token"]);

/** The reconnection delay a watch stream suggests, and the longest a watcher waits before reconnecting. */
const WATCH_RETRY_MS = 1000;
/** The server's heartbeat interval. */
const HEARTBEAT_MS = 15_000;

/** The types of watch events the API defines; others may come from newer servers. */
export type WatchEventType =
  | "granted"
  | "renewed"
  | "released"
  | "expired"
  | "revoked"
  | "revoke_requested"
  | "fence_raised"
  | "write_rejected"
  | "lost";

/** One event of a watch. Members that an event's type does not have are undefined. */
export interface WatchEvent {
  type: WatchEventType | (string & {});
  /** The resource; "" for a lost event. */
  resource: string;
  /** The stream's id of the event, "<stream>-<seq>": what a watch resumes after. */
  id: string;
  /** When the server made the change. */
  time?: Date;
  holder?: string;
  token?: bigint;
  lastFence?: bigint;
  /** The store revision, for the events that have one. */
  revision?: bigint;
  key?: string;
  /** write_rejected: "put", "delete", "claim" or "txn". */
  op?: string;
  expiresAt?: Date;
  /** lost: why the server could not resume. */
  detail?: string;
  /**
   * True for a shared hold's event ("mode": "shared": granted, renewed,
   * released, expired, and the revoked event of each holder of a revoked
   * group): holder is one of the group, token the group's. Undefined for an
   * exclusive lease's.
   */
  shared?: boolean;
  /** The event's data as the server sent it, tokens as bigint. */
  data: Record<string, JSONValue>;
}

/** Options of Client.watch. */
export interface WatchOptions extends CallOptions {
  /** Only the events of resources that start with it. Default: all. */
  prefix?: string;
  /** Resume after the event with this id (a Watcher's lastEventId, kept from before). */
  lastEventId?: string;
  /**
   * A stream silent for this long, heartbeats included (the server sends one
   * every 15 s), is taken for dead and reconnected. Default 35000; 0 never.
   */
  idleTimeoutMs?: number;
}

function date(v: JSONValue | undefined): Date | undefined {
  if (typeof v !== "string") return undefined;
  const d = new Date(v);
  return Number.isNaN(d.getTime()) ? undefined : d;
}

/**
 * Returns the typed event of one SSE event of a watch stream: its type (the
 * SSE event field), data and id. Throws a ProtocolError for data that is not
 * a JSON object with a type, or whose type is not the event field's.
 */
export function toWatchEvent(type: string, data: string, id: string): WatchEvent {
  let v: JSONValue;
  try {
    v = parseJSON(data, { bigints: EVENT_BIGINTS });
  } catch (e) {
    throw new ProtocolError(`fence: watch: decoding event ${JSON.stringify(id)}: ${(e as Error).message}`, e);
  }
  if (v === null || typeof v !== "object" || Array.isArray(v)) {
    throw new ProtocolError(`fence: watch: event ${JSON.stringify(id)}: data is not a JSON object`);
  }
  const s = (k: string) => (typeof v[k] === "string" ? (v[k] as string) : undefined);
  const b = (k: string) => (typeof v[k] === "bigint" ? (v[k] as bigint) : undefined);
  const t = s("type");
  if (t === undefined || t === "" || (type !== "" && type !== "message" && type !== t)) {
    throw new ProtocolError(`fence: watch: event ${JSON.stringify(id)}: type ${JSON.stringify(t ?? "")} in a ${JSON.stringify(type)} event`);
  }
  const ev: WatchEvent = { type: t, resource: s("resource") ?? "", id, data: v };
  const put = <K extends keyof WatchEvent>(k: K, x: WatchEvent[K] | undefined) => {
    if (x !== undefined) ev[k] = x;
  };
  put("time", date(v.time));
  put("holder", s("holder"));
  put("token", b("token"));
  put("lastFence", b("last_fence"));
  put("revision", b("revision"));
  put("key", s("key"));
  put("op", s("op"));
  put("expiresAt", date(v.expires_at));
  put("detail", s("detail"));
  if (s("mode") === "shared") ev.shared = true;
  return ev;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}

/** One connection of a watch. */
interface Conn {
  ctrl: AbortController;
  reader: ReadableStreamDefaultReader<Uint8Array>;
  parser: SSEParser;
  idle?: ReturnType<typeof setTimeout>;
}

/**
 * A watch stream (GET /v1/watch) that reconnects itself: when the stream
 * breaks (a server restarts, the leader changes, a proxy cuts it), it
 * connects again, to the next server if need be, and resumes after the last
 * event received, so that no event the server still has is missed. When the
 * server cannot resume, it yields a "lost" event: list the locks again to
 * catch up. Iterate it with `for await`; it ends when options.signal aborts,
 * at close(), or when the loop breaks. It throws when a server rejects the
 * watch (bad_request, unauthorized, forbidden: resending would not help), or
 * when no server could be reached for the client's retryForMs; a new watch
 * with `lastEventId: watcher.lastEventId` then resumes where it stopped.
 */
export class Watcher implements AsyncIterableIterator<WatchEvent> {
  readonly #t: Transport;
  readonly #path: string;
  readonly #idleMs: number;
  readonly #closed = new AbortController();
  #lastId: string; // of the last event next() returned
  #receivedId: string; // of the last event received: what a reconnect resumes after
  #retry = WATCH_RETRY_MS;
  #conn: Conn | undefined;
  #queue: SSEEvent[] = [];
  #done = false;
  #unlink: () => void;

  /** Made by Client.watch. */
  constructor(t: Transport, options: WatchOptions = {}) {
    this.#t = t;
    this.#lastId = options.lastEventId ?? "";
    this.#receivedId = this.#lastId;
    this.#idleMs = options.idleTimeoutMs ?? 2 * HEARTBEAT_MS + 5000;
    this.#path = "/v1/watch" + (options.prefix ? "?" + new URLSearchParams({ prefix: options.prefix }).toString() : "");
    const sig = options.signal;
    const onAbort = () => this.close();
    if (sig?.aborted) this.close();
    sig?.addEventListener("abort", onAbort, { once: true });
    this.#unlink = () => sig?.removeEventListener("abort", onAbort);
  }

  /** The id of the last event received (or options.lastEventId before the first): what a new watch resumes after. */
  get lastEventId(): string {
    return this.#lastId;
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  /** Connects now, rather than at the first next(), so that every event published after it resolves is received. */
  async start(): Promise<void> {
    if (this.#conn === undefined && !this.#done) await this.#connect();
  }

  /** Ends the watch: a next() under way resolves done. */
  close(): void {
    if (this.#done) return;
    this.#done = true;
    this.#closed.abort();
    this.#disconnect();
    this.#unlink();
  }

  async return(): Promise<IteratorResult<WatchEvent, undefined>> {
    this.close();
    return { done: true, value: undefined };
  }

  async next(): Promise<IteratorResult<WatchEvent, undefined>> {
    try {
      for (;;) {
        if (this.#done) return { done: true, value: undefined };
        const f = this.#queue.shift();
        if (f !== undefined) {
          const ev = toWatchEvent(f.type, f.data, f.lastEventId);
          this.#lastId = f.lastEventId;
          return { done: false, value: ev };
        }
        if (this.#conn === undefined) await this.#connect();
        if (this.#done) return { done: true, value: undefined };
        const c = this.#conn!;
        let chunk: ReadableStreamReadResult<Uint8Array> | undefined;
        try {
          chunk = await c.reader.read();
        } catch {
          chunk = undefined; // cut
        }
        if (this.#done) return { done: true, value: undefined };
        if (chunk !== undefined && !chunk.done) {
          this.#arm(c);
          this.#queue.push(...c.parser.push(chunk.value));
          this.#receivedId = c.parser.lastEventId;
          continue;
        }
        // The stream broke or ended: wait the server's reconnection delay
        // (at most 1 s), then connect again after the last event received.
        c.parser.end();
        this.#receivedId = c.parser.lastEventId;
        this.#disconnect();
        const r = c.parser.retry;
        this.#retry = r !== undefined && r > 0 && r < WATCH_RETRY_MS ? r : WATCH_RETRY_MS;
        await sleep(this.#retry, this.#closed.signal);
      }
    } catch (e) {
      this.close();
      throw e;
    }
  }

  async #connect(): Promise<void> {
    const ctrl = new AbortController();
    const onClose = () => ctrl.abort();
    this.#closed.signal.addEventListener("abort", onClose, { once: true });
    const headers: Record<string, string> = { Accept: "text/event-stream", "Cache-Control": "no-cache" };
    if (this.#receivedId !== "") headers["Last-Event-ID"] = this.#receivedId;
    let ans;
    try {
      ans = await this.#t.do({ method: "GET", path: this.#path, headers, retryable: true, stream: true, signal: ctrl.signal });
    } catch (e) {
      this.#closed.signal.removeEventListener("abort", onClose);
      if (this.#done) return;
      throw e;
    }
    const res = ans.response!;
    const ct = (res.headers.get("Content-Type") ?? "").split(";")[0].trim().toLowerCase();
    if (ct !== "text/event-stream" || res.body === null) {
      ctrl.abort();
      throw new ProtocolError(`fence: GET ${this.#path}: answered ${JSON.stringify(ct)}, not text/event-stream`);
    }
    if (this.#done) {
      ctrl.abort();
      return;
    }
    const c: Conn = { ctrl, reader: res.body.getReader(), parser: new SSEParser({ lastEventId: this.#receivedId }) };
    this.#conn = c;
    this.#arm(c);
  }

  /** (Re)starts the idle timer of c: a silent stream is cut, and reconnected. */
  #arm(c: Conn): void {
    if (this.#idleMs <= 0) return;
    if (c.idle !== undefined) clearTimeout(c.idle);
    c.idle = setTimeout(() => c.ctrl.abort(new TransportError(`fence: watch: no data for ${this.#idleMs}ms`, true, undefined)), this.#idleMs);
  }

  #disconnect(): void {
    const c = this.#conn;
    if (c === undefined) return;
    this.#conn = undefined;
    if (c.idle !== undefined) clearTimeout(c.idle);
    c.reader.cancel().catch(() => undefined);
    c.ctrl.abort();
  }
}
