// The client of a fence server (or of the servers of a cluster).

import { ServerClock } from "./clock.js";
import { BadRequestError, ForbiddenError, LeaseLostError, NotFoundError, ProtocolError } from "./errors.js";
import { parseJSON, stringifyJSON, type JSONValue } from "./json.js";
import { Lease, newHolderId, type AcquireOptions } from "./lease.js";
import { parseToken, toRevisionOrZero, toToken, type TokenLike } from "./token.js";
import {
  DEFAULT_RETRY_FOR_MS,
  DEFAULT_TIMEOUT_MS,
  Transport,
  parseAddrs,
  type Answer,
  type FetchFunction,
  type Request_,
} from "./transport.js";
import { Watcher, type WatchOptions } from "./watch.js";

/** The members of the API's answers that are tokens, revisions or epochs: read as bigint. */
export const RESPONSE_BIGINTS: ReadonlySet<string> = new Set([
  "token", "last_fence", "last_token", "presented", "current", "revision", "epoch", "fence", "revoked_token",
]);

/** The most resources one multi-acquire (acquireAll) takes. */
export const MAX_MULTI = 100;

/** The most permits a semaphore may have: an acquire's limit is in 1..MAX_LIMIT. */
export const MAX_LIMIT = 1000;

/** Options of a Client. */
export interface ClientOptions {
  /** Sent as "Authorization: Bearer <authToken>" with every request. */
  authToken?: string;
  /**
   * Whether the client keeps one server session for its leases (the
   * default, true): acquire and acquireAll then take every lease whose TTL
   * is sessionTtlMs, and that is not shared, in it, so that the client
   * sends one renewal per TTL/3 however many leases it holds; each lease
   * ends with the session (SessionEndedError). close() ends the session;
   * its renewals keep no Node process alive by themselves (nor do the
   * leases in it). false: every lease keeps itself alive.
   */
  session?: boolean;
  /** The TTL of the client's session, in milliseconds. Default 10000. */
  sessionTtlMs?: number;
  /**
   * How long one attempt of a call may take before it is abandoned, in
   * milliseconds (an acquire adds its wait). An attempt that times out has an
   * unknown outcome: it is retried only if the call is safe to repeat.
   * Default 30000; 0 means no timeout.
   */
  timeoutMs?: number;
  /** The fetch function to send with. Default: globalThis.fetch. */
  fetch?: FetchFunction;
  /** How long after a call began a retry may still start. Default 15000; 0 disables retries. */
  retryForMs?: number;
  /** Caps how many times one call is resent after its first attempt; negative (the default) sets no cap. */
  retries?: number;
  /** The wait before a retry, doubled for each next one (with jitter), at most 1 s. Default 50. */
  backoffMs?: number;
}

/** Options every call takes. */
export interface CallOptions {
  /** Aborts the call (its retries too); the call then rejects with the signal's reason. */
  signal?: AbortSignal;
}

/** A lease as the server describes it. */
export interface LeaseInfo {
  resource: string;
  holder: string;
  token: bigint;
  ttlMs: number;
  expiresAt: Date;
  /** The signed sequencer of the grant; undefined if the server signs nothing. */
  sequencer?: string;
  /** The session the lease is in; undefined for a lease of its own. */
  session?: SessionRef;
  /** True for a shared hold: token is its group's (renew and release name holder). */
  shared?: boolean;
  /** When the server revokes the lease, its holder asked to let go (Client.askToRelease); undefined if nobody asked. */
  revokeAt?: Date;
  /**
   * In a session's renewal: the leases in the session that a caller asked to
   * let go, in byte order of resource (they send no renewal of their own);
   * undefined if none. One listed and then no longer, not released by its
   * holder, was revoked.
   */
  asked?: AskedLease[];
}

/** A lease in a session that a caller asked to let go, as the session's renewal lists it. */
export interface AskedLease {
  resource: string;
  token: bigint;
  revokeAt: Date;
}

/**
 * The prefix of every session resource: a session is a lease on
 * `.session/NAME`, opened by acquiring it, renewed by renewing it and closed
 * by releasing it.
 */
export const SESSION_PREFIX = ".session/";

/** Returns the resource of the session called name. */
export function sessionResource(name: string): string {
  return SESSION_PREFIX + name;
}

/** A session: the lease on its session resource that is it. */
export interface SessionRef {
  resource: string;
  token: bigint;
}

/** The status of a lock, from GET /v1/locks/{resource}. */
export interface LockStatus {
  resource: string;
  held: boolean;
  /** Set only while held (and not by a shared group: see holders). */
  holder?: string;
  token?: bigint;
  expiresAt?: Date;
  /** The highest token issued for the resource, 0n if none. */
  lastToken: bigint;
  /** True while a group of shared holders holds it; holders names them (byte order). */
  shared?: boolean;
  holders?: string[];
  /** When the lease is revoked, its holder asked to let go; undefined if nobody asked. */
  revokeAt?: Date;
  /** The session the held lease is in; undefined for a lease of its own, or while free. */
  session?: SessionRef;
}

/** The answer to askToRelease of a held resource: the lease asked to let go, revoked at revokeAt unless released first. */
export interface RevokeAsked {
  resource: string;
  /** The lease's holder; undefined for a shared group. */
  holder?: string;
  token: bigint;
  revokeAt: Date;
  shared: boolean;
}

/** One held lock of a listing. */
export interface ListedLock {
  resource: string;
  holder: string;
  token: bigint;
  expiresAt: Date;
  /** The acquires waiting for it. */
  waiters: number;
  /**
   * True for a shared group: holders names its holders (byte order), token
   * is the group's and holder is "". Undefined for an exclusive lease.
   */
  shared?: boolean;
  /** The shared group's holders, in byte order; undefined for an exclusive lease. */
  holders?: string[];
  /** The session the lease is in; undefined for a lease of its own. */
  session?: SessionRef;
  /** When the lease is revoked, its holder asked to let go (Client.askToRelease); undefined if nobody asked. */
  revokeAt?: Date;
}

/** One page of GET /v1/locks. */
export interface ListPage {
  locks: ListedLock[];
  /** The `after` of the next page; undefined on the last page. */
  next?: string;
}

/** A resource's fencing state, from a listing of the fences. */
export interface ListedFence {
  resource: string;
  /** The last token the lock service issued for the resource. */
  lastToken: bigint;
  /** The highest token the storage accepted or a grant raised the fence to. */
  lastFence: bigint;
}

/** One page of GET /v1/fences. */
export interface FencePage {
  fences: ListedFence[];
  /** The `after` of the next page; undefined on the last page. */
  next?: string;
}

/** Options of a listing. */
export interface ListOptions extends CallOptions {
  /** Only the locks whose resource starts with it. */
  prefix?: string;
  /** Only the locks after it, in byte order. */
  after?: string;
  /** At most this many per page (1..1000; default: the server's, 100). */
  limit?: number;
}

/** The answer to a transfer: the successor's lease, without its sequencer. */
export interface Transferred {
  resource: string;
  holder: string;
  token: bigint;
  expiresAt: Date;
}

/** The answer to a revoke. */
export interface RevokeResult {
  resource: string;
  /** The token of the lease revoked, 0n if the resource was free. */
  revokedToken: bigint;
  /** The resource's fence after the revoke. */
  lastFence: bigint;
}

/** What a server knows of its cluster, from GET /v1/cluster. */
export interface ClusterStatus {
  role: "leader" | "standby" | string;
  leader: string;
  epoch: bigint;
  store: string;
  servers: { url: string; role: string }[];
}

/** A public key that verifies sequencers, as GET /v1/keys serves it (an RFC 8037 JWK). */
export interface PublicKeyJWK {
  kty: string;
  crv: string;
  alg?: string;
  kid: string;
  x: string;
}

/** A value to store: bytes, or a string (stored as its UTF-8). */
export type Value = string | Uint8Array | ArrayBuffer;

/** Options of a storage write. */
export interface WriteOptions extends CallOptions {
  /** Write only if the key is at this revision, or, with "*", only if it exists (If-Match). */
  ifMatch?: TokenLike | "*";
  /** With "*": write only if the key does not exist (If-None-Match: *). */
  ifNoneMatch?: "*";
  /** Sent as Fence-Sequencer, next to Fencing-Token. */
  sequencer?: string;
}

/** The answer to a put. */
export interface PutResult {
  resource: string;
  key: string;
  revision: bigint;
  /** The resource's fence after the write. */
  fence: bigint;
}

/** The answer to a delete. */
export interface DeleteResult {
  resource: string;
  key: string;
  revision: bigint;
}

/** The answer to a claim. */
export interface ClaimResult {
  resource: string;
  lastFence: bigint;
}

/** A stored value. */
export interface Item {
  resource: string;
  key: string;
  value: Uint8Array;
  /** The revision of the write that stored it (the ETag). */
  revision: bigint;
  /** The token of the write that stored it. */
  token: bigint;
  /** The value decoded as UTF-8. */
  text(): string;
}

/** A compare of a txn: the key must be at revision (0: absent). */
export interface TxnCompare {
  resource: string;
  key: string;
  revision: TokenLike;
}

/** An operation of a txn. */
export type TxnOp =
  | { op: "put"; resource: string; key: string; value: Value }
  | { op: "delete"; resource: string; key: string };

/** A transaction: several keys, several resources, all or nothing. */
export interface Txn {
  /** The fencing token presented for each resource; each is checked and raised. */
  fences?: Record<string, TokenLike> | Map<string, TokenLike>;
  if?: TxnCompare[];
  then?: TxnOp[];
}

const utf8 = new TextEncoder();

/** Returns v as the bytes to send. */
export function valueBytes(v: Value): Uint8Array {
  if (typeof v === "string") return utf8.encode(v);
  if (v instanceof Uint8Array) return v;
  if (v instanceof ArrayBuffer) return new Uint8Array(v);
  throw new TypeError("fence: a value must be a string, a Uint8Array or an ArrayBuffer");
}

/** /v1/locks/{resource}{suffix}, the resource as one escaped segment. */
function lockPath(resource: string, suffix = ""): string {
  return "/v1/locks/" + seg(resource) + suffix;
}

function kvPath(resource: string, key: string): string {
  return "/v1/kv/" + seg(resource) + "/" + String(key).split("/").map(seg).join("/");
}

/**
 * One escaped path segment. "." and ".." (and their %2e forms) cannot be sent:
 * URL parsers (WHATWG URL, so fetch) resolve them, which would address
 * another path; they are refused with a TypeError before sending.
 */
function seg(s: string): string {
  if (typeof s !== "string") throw new TypeError("fence: names must be strings");
  if (s === "." || s === "..") throw new TypeError(`fence: ${JSON.stringify(s)} cannot be sent as a path segment (URLs resolve it)`);
  return encodeURIComponent(s);
}

function decode(ans: Answer, what: string): Record<string, JSONValue> {
  let v: JSONValue;
  try {
    v = parseJSON(new TextDecoder().decode(ans.body), { bigints: RESPONSE_BIGINTS });
  } catch (e) {
    throw new ProtocolError(`fence: ${what}: decoding the answer: ${(e as Error).message}`, e);
  }
  if (v === null || typeof v !== "object" || Array.isArray(v)) throw new ProtocolError(`fence: ${what}: the answer is not a JSON object`);
  return v;
}

const bigOf = (o: Record<string, JSONValue>, k: string, what: string, optional = false): bigint => {
  const v = o[k];
  if (typeof v === "bigint") return v;
  if (v === undefined && optional) return 0n;
  throw new ProtocolError(`fence: ${what}: member ${k} is not an integer`);
};
const strOf = (o: Record<string, JSONValue>, k: string, what: string, optional = false): string => {
  const v = o[k];
  if (typeof v === "string") return v;
  if (v === undefined && optional) return "";
  throw new ProtocolError(`fence: ${what}: member ${k} is not a string`);
};
const numOf = (o: Record<string, JSONValue>, k: string, what: string): number => {
  const v = o[k];
  if (typeof v === "number") return v;
  if (typeof v === "bigint") return Number(v);
  throw new ProtocolError(`fence: ${what}: member ${k} is not a number`);
};
const dateOf = (o: Record<string, JSONValue>, k: string, what: string): Date => {
  const s = strOf(o, k, what);
  const d = new Date(s);
  if (Number.isNaN(d.getTime())) throw new ProtocolError(`fence: ${what}: ${k} ${JSON.stringify(s)} is not a time`);
  return d;
};

/** The session of an answer's session member; undefined if it is absent. */
function sessionOf(o: Record<string, JSONValue>, what: string): SessionRef | undefined {
  const s = o.session;
  if (s === undefined || s === null) return undefined;
  if (typeof s !== "object" || Array.isArray(s)) throw new ProtocolError(`fence: ${what}: member session is not an object`);
  return { resource: strOf(s, "resource", what), token: bigOf(s, "token", what) };
}

/** The holders of a shared group, from an answer's holders member (its strings; [] if none). */
function holdersOf(o: Record<string, JSONValue>): string[] {
  return Array.isArray(o.holders) ? o.holders.filter((h): h is string => typeof h === "string") : [];
}

function leaseOf(o: Record<string, JSONValue>, what: string): LeaseInfo {
  const l: LeaseInfo = {
    resource: strOf(o, "resource", what),
    holder: strOf(o, "holder", what),
    token: bigOf(o, "token", what),
    ttlMs: numOf(o, "ttl_ms", what),
    expiresAt: dateOf(o, "expires_at", what),
  };
  if (typeof o.sequencer === "string" && o.sequencer !== "") l.sequencer = o.sequencer;
  if (o.mode === "shared") l.shared = true;
  if (typeof o.revoke_at === "string") l.revokeAt = dateOf(o, "revoke_at", what);
  if (o.asked !== undefined && o.asked !== null) {
    if (!Array.isArray(o.asked)) throw new ProtocolError(`fence: ${what}: member asked is not an array`);
    l.asked = o.asked.map((a) => {
      if (typeof a !== "object" || a === null || Array.isArray(a)) throw new ProtocolError(`fence: ${what}: an asked lease is not an object`);
      return { resource: strOf(a, "resource", what), token: bigOf(a, "token", what), revokeAt: dateOf(a, "revoke_at", what) };
    });
  }
  const session = sessionOf(o, what);
  if (session !== undefined) l.session = session;
  return l;
}

function condHeaders(token: TokenLike, opts: WriteOptions | undefined, withCond: boolean): Record<string, string> {
  const h: Record<string, string> = { "Fencing-Token": toToken(token).toString() };
  if (withCond && opts?.ifMatch !== undefined) {
    h["If-Match"] = opts.ifMatch === "*" ? "*" : `"${toToken(opts.ifMatch, "ifMatch revision")}"`;
  }
  if (withCond && opts?.ifNoneMatch !== undefined) {
    if (opts.ifNoneMatch !== "*") throw new TypeError('fence: ifNoneMatch must be "*"');
    h["If-None-Match"] = "*";
  }
  if (opts?.sequencer) h["Fence-Sequencer"] = opts.sequencer;
  return h;
}

function bytesToBase64(b: Uint8Array): string {
  let s = "";
  for (let i = 0; i < b.length; i += 0x8000) s += String.fromCharCode(...b.subarray(i, i + 0x8000));
  return btoa(s);
}

/**
 * A client of a fence server: `new Client("http://127.0.0.1:7700")`, or of the
 * servers of a cluster, their base URLs separated by commas
 * ("http://a:7700,http://b:7700"). It sends every call to its current address
 * and stays there while that server answers; after a transport error or a
 * 503 it moves on to the next address, round robin.
 *
 * Calls that are safe to repeat (reads, acquire, renew, release, claim, a put
 * without a condition) are retried after a transport error or a 503 until
 * they get another answer, their signal aborts, or retryForMs has passed since
 * the call began. The others (txn, a conditional put, delete, revoke) are
 * resent only when the request certainly did not take effect: no connection
 * could be made, or the server answered 503 not_leader. After any other
 * transport error or 503 their outcome is unknown (see isAmbiguous).
 */
export class Client {
  readonly #t: Transport;
  #useSession: boolean;
  readonly #sessionTtlMs: number;
  readonly #sessionId = "client-" + newHolderId().slice(2);
  readonly #clock = new ServerClock(); // the leader's clock, for Fence-Deadline
  #keep: Promise<Lease | undefined> | undefined;

  constructor(addr: string, options: ClientOptions = {}) {
    const f = options.fetch ?? (globalThis.fetch?.bind(globalThis) as FetchFunction | undefined);
    if (typeof f !== "function") throw new TypeError("fence: no fetch function: pass options.fetch");
    if (options.authToken !== undefined && !/^[\x21-\x7e]+$/.test(options.authToken)) {
      throw new TypeError("fence: authToken must be printable ASCII without spaces");
    }
    const num = (v: number | undefined, d: number, name: string): number => {
      if (v === undefined) return d;
      if (typeof v !== "number" || Number.isNaN(v)) throw new TypeError(`fence: ${name} must be a number`);
      return v;
    };
    this.#useSession = options.session !== false;
    this.#sessionTtlMs = num(options.sessionTtlMs, 10_000, "sessionTtlMs");
    this.#t = new Transport(parseAddrs(addr), {
      authToken: options.authToken,
      timeoutMs: num(options.timeoutMs, DEFAULT_TIMEOUT_MS, "timeoutMs"),
      fetch: f,
      retryForMs: num(options.retryForMs, DEFAULT_RETRY_FOR_MS, "retryForMs"),
      retries: num(options.retries, -1, "retries"),
      backoffMs: num(options.backoffMs, 50, "backoffMs"),
    });
  }

  /** The servers' base URLs, in the order given. */
  get addrs(): string[] {
    return [...this.#t.servers.addrs];
  }

  /** The base URL of the server the client talks to now. */
  get current(): string {
    return this.#t.servers.addrs[this.#t.servers.current()];
  }

  #do(req: Request_): Promise<Answer> {
    return this.#t.do(req);
  }

  async #json(req: Request_): Promise<Record<string, JSONValue>> {
    return decode(await this.#do(req), `${req.method} ${req.path}`);
  }

  /**
   * Acquires resource and returns a Lease that renews itself until released
   * or lost (see Lease). Rejects with a LockHeldError if another holder kept
   * the lock for all of waitMs.
   */
  async acquire(resource: string, options: AcquireOptions = {}): Promise<Lease> {
    if (options.limit !== undefined) checkLimit(options.limit); // before the session is opened
    const ttlMs = options.ttlMs ?? 10_000;
    const keeper = await this.#sessionFor(ttlMs, options.shared === true);
    if (keeper === undefined) return Lease.acquire(this, resource, options);
    try {
      return await Lease.acquire(this, resource, options, keeper);
    } catch (e) {
      if (!(e instanceof LeaseLostError) || e.resource !== keeper.resource) throw e;
      // The session ended meanwhile: open another.
      const again = await this.#sessionFor(ttlMs, false);
      return Lease.acquire(this, resource, options, again);
    }
  }

  /**
   * The client's session, opened now if none is open, for a lease of ttlMs;
   * undefined if the lease keeps itself alive: the client has no sessions,
   * the lease is shared or has another TTL, or the server refuses the
   * session (no lock on .session/).
   */
  async #sessionFor(ttlMs: number, shared: boolean): Promise<Lease | undefined> {
    if (!this.#useSession || shared || ttlMs !== this.#sessionTtlMs) return undefined;
    const current = this.#keep === undefined ? undefined : await this.#keep;
    if (current !== undefined && !current.signal.aborted) return current;
    const opening = Lease.acquire(this, sessionResource(this.#sessionId), { ttlMs: this.#sessionTtlMs, holder: this.#sessionId }, undefined, true).then(
      (l) => l as Lease | undefined,
      (e: unknown) => {
        if (e instanceof ForbiddenError || e instanceof NotFoundError || e instanceof BadRequestError) {
          this.#useSession = false;
          return undefined;
        }
        this.#keep = undefined;
        throw e;
      },
    );
    this.#keep = opening;
    return opening;
  }

  /** The client's session, undefined if none is open. */
  async session(): Promise<Lease | undefined> {
    const keep = this.#keep === undefined ? undefined : await this.#keep.catch(() => undefined);
    return keep !== undefined && !keep.signal.aborted ? keep : undefined;
  }

  /** Releases the client's session, if one is open, and with it every lease in it; the next acquire opens another. */
  async close(): Promise<void> {
    const keep = await this.session();
    this.#keep = undefined;
    await keep?.release();
  }

  /**
   * Acquires every one of resources at once, all or none, and returns a
   * Lease per resource, in their order, each renewing itself (see
   * acquireAllOnce). Rejects with a LockHeldError naming a resource that
   * another holder kept for all of waitMs; it then holds none.
   */
  async acquireAll(resources: string[], options: AcquireOptions = {}): Promise<Lease[]> {
    if (options.limit !== undefined || options.shared) throw new TypeError("fence: a multi-acquire takes neither limit nor shared");
    const keeper = await this.#sessionFor(options.ttlMs ?? 10_000, false);
    return Lease.acquireAll(this, resources, options, keeper);
  }

  /**
   * Acquires every one of resources (1..100 distinct names) at once, without
   * keepalive: POST /v1/locks. One durable change grants them all, each
   * with its own token, or none: a request refused (LockHeldError, naming a
   * resource it could not get within waitMs), timed out or failed holds none
   * of them. Waiting never deadlocks with another multi-acquire. The leases
   * come in the order of resources.
   */
  async acquireAllOnce(
    resources: string[],
    options: { holder: string; ttlMs?: number; waitMs?: number; session?: { readonly resource: string; readonly token: TokenLike } } & CallOptions,
  ): Promise<LeaseInfo[]> {
    if (!Array.isArray(resources) || resources.length < 1 || resources.length > MAX_MULTI) {
      throw new RangeError(`fence: resources must have 1..${MAX_MULTI} names`);
    }
    if (new Set(resources).size !== resources.length) throw new RangeError("fence: resources must be distinct");
    const waitMs = options.waitMs ?? 0;
    checkMs(waitMs, "waitMs");
    const body: Record<string, unknown> = { resources, holder: options.holder, wait_ms: Math.round(waitMs) };
    if (options.session !== undefined) body.session = { resource: options.session.resource, token: toToken(options.session.token, "session token") };
    if (options.ttlMs !== undefined || options.session === undefined) {
      const ttlMs = options.ttlMs ?? 10_000;
      checkMs(ttlMs, "ttlMs");
      body.ttl_ms = Math.round(ttlMs);
    }
    const path = "/v1/locks";
    const what = `POST ${path}`;
    const o = await this.#json({ method: "POST", path, retryable: true, signal: options.signal, extraTimeoutMs: waitMs, body: stringifyJSON(body) });
    const ls = o.leases;
    if (!Array.isArray(ls)) throw new ProtocolError(`fence: ${what}: member leases is not an array`);
    return ls.map((l) => {
      if (typeof l !== "object" || l === null || Array.isArray(l)) throw new ProtocolError(`fence: ${what}: a lease is not an object`);
      return leaseOf(l, what);
    });
  }

  /**
   * Acquires resource once, without keepalive: POST .../acquire. The same
   * holder acquiring a lease it still holds gets the same token back.
   *
   * With limit N (an integer in 1..1000, else a TypeError or RangeError before
   * sending) resource names a semaphore and this takes one of its N permits:
   * the answer's resource is then the permit's slot, `{resource}/permit-I-of-N`,
   * which renew, release, transfer and fenced writes take. Another limit than
   * the one the permits held now were taken with, or a slot's name acquired
   * without a limit, rejects with BadRequestError.
   *
   * With session (a SessionRef, or the lease on a session resource,
   * sessionResource(NAME), e.g. a Lease that keeps it alive) the lease joins
   * that session: its TTL is the session's (ttlMs undefined, or the same),
   * the session's renewals renew it (its own renew rejects with
   * BadRequestError), and it ends with the session. A session that is not
   * open rejects with LeaseLostError. ttlMs defaults to 10000 outside a
   * session.
   *
   * With shared the hold is shared: beside any number of other shared
   * holders and no exclusive one, with their group's token (the answer's
   * shared is true); renew and release it with its holder. An exclusive
   * holder acquiring shared downgrades; a shared holder acquiring
   * exclusively rejects with BadRequestError. It takes no limit and no
   * session.
   */
  async acquireOnce(
    resource: string,
    options: {
      holder: string;
      ttlMs?: number;
      waitMs?: number;
      /** Take one of the limit permits of the semaphore resource (1..1000). */
      limit?: number;
      /** Join this session. */
      session?: { readonly resource: string; readonly token: TokenLike };
      /** A shared hold (a read lock), beside other shared holders and no exclusive one. */
      shared?: boolean;
    } & CallOptions,
  ): Promise<LeaseInfo> {
    const waitMs = options.waitMs ?? 0;
    checkMs(waitMs, "waitMs");
    const body: Record<string, unknown> = { holder: options.holder, wait_ms: Math.round(waitMs) };
    if (options.session !== undefined) {
      const { resource: sr, token: st } = options.session;
      if (typeof sr !== "string" || !sr.startsWith(SESSION_PREFIX) || sr === SESSION_PREFIX) {
        throw new TypeError(`fence: session ${show(sr)} is not a lease on a session resource (${SESSION_PREFIX}NAME)`);
      }
      body.session = { resource: sr, token: toToken(st, "session token") };
    }
    if (options.ttlMs !== undefined || options.session === undefined) {
      const ttlMs = options.ttlMs ?? 10_000;
      checkMs(ttlMs, "ttlMs");
      body.ttl_ms = Math.round(ttlMs);
    }
    if (options.limit !== undefined) body.limit = checkLimit(options.limit);
    if (options.shared) body.mode = "shared";
    const path = lockPath(resource, "/acquire");
    const o = await this.#json({
      method: "POST", path, retryable: true, signal: options.signal, extraTimeoutMs: waitMs,
      body: stringifyJSON(body),
    });
    return leaseOf(o, `POST ${path}`);
  }

  /**
   * Renews a lease: POST .../renew; rejects with LeaseLostError if token is
   * not the current lease. holder names the lease's holder: required for a
   * shared hold, whose token is its group's. deadline is when the caller
   * stops waiting for the answer (a Lease's keepalive gives its local
   * deadline): once the client knows the server's clock, learnt from the
   * renewals answered before, it is sent on that clock (Fence-Deadline),
   * and a server that reads the renewal later (it was frozen while the
   * request waited in its socket) applies nothing, rather than hold for
   * another TTL a lease its holder has given up. A server that refuses a
   * deadline not reached yet (another server, another clock, leads) gets
   * the renewal again without one.
   */
  async renew(resource: string, token: TokenLike, options: { ttlMs?: number; holder?: string; deadline?: Date } & CallOptions = {}): Promise<LeaseInfo> {
    const t = toToken(token);
    const body: Record<string, unknown> = { token: t };
    if (options.ttlMs !== undefined) {
      checkMs(options.ttlMs, "ttlMs");
      body.ttl_ms = Math.round(options.ttlMs);
    }
    if (options.holder !== undefined) body.holder = options.holder;
    const path = lockPath(resource, "/renew");
    const req = { method: "POST", path, retryable: true, signal: options.signal, body: stringifyJSON(body) };
    const deadline = options.deadline === undefined ? undefined : this.#clock.toServer(options.deadline.getTime());
    let sent = Date.now();
    let start = globalThis.performance.now();
    let o: Record<string, JSONValue>;
    try {
      o = await this.#json(deadline === undefined ? req : { ...req, headers: { "Fence-Deadline": deadline } });
    } catch (e) {
      if (deadline === undefined || !(e instanceof BadRequestError) || options.signal?.aborted) throw e;
      this.#clock.forget();
      sent = Date.now();
      start = globalThis.performance.now();
      o = await this.#json(req);
    }
    const info = leaseOf(o, `POST ${path}`);
    this.#clock.learn(sent, globalThis.performance.now() - start, info);
    return info;
  }

  /**
   * Releases a lease: POST .../release; rejects with LeaseLostError if token
   * is not the current lease. holder names the lease's holder: required for
   * a shared hold.
   */
  async release(resource: string, token: TokenLike, options: { holder?: string } & CallOptions = {}): Promise<void> {
    const body: Record<string, unknown> = { token: toToken(token) };
    if (options.holder !== undefined) body.holder = options.holder;
    await this.#do({ method: "POST", path: lockPath(resource, "/release"), retryable: true, signal: options.signal, body: stringifyJSON(body) });
  }

  /**
   * Hands the lease of token to the first waiter whose holder is to (absent or
   * "": the first waiter) in one change: POST .../transfer. The successor's
   * token is greater and fences this one at once. Rejects with NotFoundError
   * if nobody of that name waits (nothing changes), LeaseLostError if token
   * does not hold the lease. It is sent once (resent after it took effect it
   * would be lease_lost), so a transport error leaves the outcome unknown.
   */
  async transfer(resource: string, token: TokenLike, to?: string, options: CallOptions = {}): Promise<Transferred> {
    const body: Record<string, unknown> = { token: toToken(token) };
    if (to) body.to = to;
    const path = lockPath(resource, "/transfer");
    const what = `POST ${path}`;
    const o = await this.#json({ method: "POST", path, retryable: false, signal: options.signal, body: stringifyJSON(body) });
    return { resource: strOf(o, "resource", what), holder: strOf(o, "holder", what), token: bigOf(o, "token", what), expiresAt: dateOf(o, "expires_at", what) };
  }

  /** Returns the lock's status. */
  async status(resource: string, options: CallOptions = {}): Promise<LockStatus> {
    const path = lockPath(resource);
    const what = `GET ${path}`;
    const o = await this.#json({ method: "GET", path, retryable: true, signal: options.signal });
    const st: LockStatus = { resource: strOf(o, "resource", what), held: o.held === true, lastToken: bigOf(o, "last_token", what, true) };
    if (st.held) {
      if (o.mode === "shared") {
        st.shared = true;
        st.holders = holdersOf(o);
      } else {
        st.holder = strOf(o, "holder", what);
      }
      st.token = bigOf(o, "token", what);
      st.expiresAt = dateOf(o, "expires_at", what);
      if (typeof o.revoke_at === "string") st.revokeAt = dateOf(o, "revoke_at", what);
      const session = sessionOf(o, what);
      if (session !== undefined) st.session = session;
    }
    return st;
  }

  /**
   * Asks the holder of resource to let go within graceMs (cooperative
   * revocation; admin): POST .../revoke with grace_ms. The server records
   * the request, tells the holder (revokeAt on its renewals, a
   * revoke_requested watch event) and revokes the lease at the deadline if
   * it still holds. Resolves to the lease asked, or undefined if the
   * resource was free (it is then revoked at once). Sent once, as revoke is.
   */
  async askToRelease(resource: string, graceMs: number, options: CallOptions = {}): Promise<RevokeAsked | undefined> {
    checkMs(graceMs, "graceMs");
    const path = lockPath(resource, "/revoke");
    const what = `POST ${path}`;
    const o = await this.#json({ method: "POST", path, retryable: false, signal: options.signal, body: stringifyJSON({ grace_ms: Math.round(graceMs) }) });
    if (typeof o.revoke_at !== "string") return undefined;
    const asked: RevokeAsked = { resource: strOf(o, "resource", what), token: bigOf(o, "token", what), revokeAt: dateOf(o, "revoke_at", what), shared: o.mode === "shared" };
    if (typeof o.holder === "string") asked.holder = o.holder;
    return asked;
  }

  /**
   * Takes the lock from its holder and fences it: POST .../revoke (admin). It
   * is sent once (a repeated revoke would issue another token), so a
   * transport error leaves the outcome unknown.
   */
  async revoke(resource: string, options: CallOptions = {}): Promise<RevokeResult> {
    const path = lockPath(resource, "/revoke");
    const what = `POST ${path}`;
    const o = await this.#json({ method: "POST", path, retryable: false, signal: options.signal, body: "{}" });
    return { resource: strOf(o, "resource", what), revokedToken: bigOf(o, "revoked_token", what, true), lastFence: bigOf(o, "last_fence", what) };
  }

  /** Returns one page of the locks held now: GET /v1/locks. */
  async listPage(options: ListOptions = {}): Promise<ListPage> {
    const path = pagePath("/v1/locks", options);
    const what = `GET ${path}`;
    const o = await this.#json({ method: "GET", path, retryable: true, signal: options.signal });
    if (!Array.isArray(o.locks)) throw new ProtocolError(`fence: ${what}: no locks array`);
    const locks = o.locks.map((l): ListedLock => {
      if (l === null || typeof l !== "object" || Array.isArray(l)) throw new ProtocolError(`fence: ${what}: a lock is not an object`);
      const lock: ListedLock = {
        resource: strOf(l, "resource", what),
        holder: strOf(l, "holder", what),
        token: bigOf(l, "token", what),
        expiresAt: dateOf(l, "expires_at", what),
        waiters: typeof l.waiters === "number" ? l.waiters : 0,
      };
      if (l.mode === "shared") {
        lock.shared = true;
        lock.holders = holdersOf(l);
      }
      const session = sessionOf(l, what);
      if (session !== undefined) lock.session = session;
      if (typeof l.revoke_at === "string") lock.revokeAt = dateOf(l, "revoke_at", what);
      return lock;
    });
    const page: ListPage = { locks };
    if (typeof o.next === "string" && o.next !== "") page.next = o.next;
    return page;
  }

  /**
   * Lists every lock held now under options.prefix, page after page, as an
   * async iterator: `for await (const l of client.list({prefix: "orders/"}))`.
   */
  async *list(options: ListOptions = {}): AsyncGenerator<ListedLock, void, undefined> {
    for await (const page of pages((after) => this.listPage({ ...options, after }), options.after)) yield* page.locks;
  }

  /**
   * Returns one page of the resources for which a token was issued or a
   * fence raised, held now or not, with their last token and last fence:
   * GET /v1/fences.
   */
  async fencesPage(options: ListOptions = {}): Promise<FencePage> {
    const path = pagePath("/v1/fences", options);
    const what = `GET ${path}`;
    const o = await this.#json({ method: "GET", path, retryable: true, signal: options.signal });
    if (!Array.isArray(o.fences)) throw new ProtocolError(`fence: ${what}: no fences array`);
    const fences = o.fences.map((f): ListedFence => {
      if (f === null || typeof f !== "object" || Array.isArray(f)) throw new ProtocolError(`fence: ${what}: a fence is not an object`);
      return { resource: strOf(f, "resource", what), lastToken: bigOf(f, "last_token", what), lastFence: bigOf(f, "last_fence", what) };
    });
    const page: FencePage = { fences };
    if (typeof o.next === "string" && o.next !== "") page.next = o.next;
    return page;
  }

  /**
   * Lists every resource's last token and last fence under options.prefix,
   * page after page, as an async iterator.
   */
  async *fences(options: ListOptions = {}): AsyncGenerator<ListedFence, void, undefined> {
    for await (const page of pages((after) => this.fencesPage({ ...options, after }), options.after)) yield* page.fences;
  }

  /** Returns what the current server knows of its cluster: GET /v1/cluster. */
  async cluster(options: CallOptions = {}): Promise<ClusterStatus> {
    const what = "GET /v1/cluster";
    const o = await this.#json({ method: "GET", path: "/v1/cluster", retryable: true, signal: options.signal });
    const servers = Array.isArray(o.servers) ? o.servers : [];
    return {
      role: strOf(o, "role", what),
      leader: strOf(o, "leader", what, true),
      epoch: bigOf(o, "epoch", what),
      store: strOf(o, "store", what, true),
      servers: servers.map((s) => {
        const so = (s ?? {}) as Record<string, JSONValue>;
        return { url: typeof so.url === "string" ? so.url : "", role: typeof so.role === "string" ? so.role : "" };
      }),
    };
  }

  /** Returns the public keys that verify the server's sequencers (GET /v1/keys): none if it signs nothing. */
  async keys(options: CallOptions = {}): Promise<PublicKeyJWK[]> {
    const o = await this.#json({ method: "GET", path: "/v1/keys", retryable: true, signal: options.signal });
    if (!Array.isArray(o.keys)) throw new ProtocolError("fence: GET /v1/keys: no keys array");
    return o.keys as unknown as PublicKeyJWK[];
  }

  /**
   * Writes value under resource/key with a fencing token: PUT /v1/kv. A put
   * without a condition is safe to repeat; a conditional one is not.
   */
  async put(resource: string, key: string, value: Value, token: TokenLike, options: WriteOptions = {}): Promise<PutResult> {
    const headers = condHeaders(token, options, true);
    headers["Content-Type"] = "application/octet-stream";
    const path = kvPath(resource, key);
    const what = `PUT ${path}`;
    const conditional = options.ifMatch !== undefined || options.ifNoneMatch !== undefined;
    const o = await this.#json({ method: "PUT", path, headers, body: valueBytes(value), retryable: !conditional, signal: options.signal });
    return { resource: strOf(o, "resource", what), key: strOf(o, "key", what), revision: bigOf(o, "revision", what), fence: bigOf(o, "fence", what) };
  }

  /** Reads resource/key: GET /v1/kv; rejects with NotFoundError if it does not exist. */
  async get(resource: string, key: string, options: CallOptions = {}): Promise<Item> {
    const path = kvPath(resource, key);
    const ans = await this.#do({ method: "GET", path, retryable: true, signal: options.signal });
    const etag = ans.headers.get("ETag") ?? "";
    // A revision is read up to 2^64-1: the server's counter is unsigned and
    // is not capped at 2^63-1 as tokens are.
    const m = /^"([1-9][0-9]{0,19})"$/.exec(etag);
    const revision = m && BigInt(m[1]) < 2n ** 64n ? BigInt(m[1]) : undefined;
    if (revision === undefined) throw new ProtocolError(`fence: GET ${path}: ETag ${JSON.stringify(etag)} is not a revision`);
    const token = parseToken(ans.headers.get("Fencing-Token"));
    if (token === undefined) throw new ProtocolError(`fence: GET ${path}: Fencing-Token ${JSON.stringify(ans.headers.get("Fencing-Token"))} is not a token`);
    const value = ans.body;
    return { resource, key, value, revision, token, text: () => new TextDecoder().decode(value) };
  }

  /**
   * Deletes resource/key with a fencing token: DELETE /v1/kv. It is resent
   * only when it certainly did not take effect.
   */
  async delete(resource: string, key: string, token: TokenLike, options: WriteOptions = {}): Promise<DeleteResult> {
    const path = kvPath(resource, key);
    const what = `DELETE ${path}`;
    const o = await this.#json({ method: "DELETE", path, headers: condHeaders(token, options, true), retryable: false, signal: options.signal });
    return { resource: strOf(o, "resource", what), key: strOf(o, "key", what), revision: bigOf(o, "revision", what) };
  }

  /**
   * Raises the resource's fence to token without writing (a holder claims the
   * resource): POST /v1/fences/{resource}.
   */
  async claim(resource: string, token: TokenLike, options: Omit<WriteOptions, "ifMatch" | "ifNoneMatch"> = {}): Promise<ClaimResult> {
    const path = "/v1/fences/" + seg(resource);
    const what = `POST ${path}`;
    const o = await this.#json({ method: "POST", path, headers: condHeaders(token, options, false), retryable: true, signal: options.signal });
    return { resource: strOf(o, "resource", what), lastFence: bigOf(o, "last_fence", what) };
  }

  /** Returns the resource's last fence (0n for an unknown resource): GET /v1/fences/{resource}. */
  async fence(resource: string, options: CallOptions = {}): Promise<bigint> {
    const path = "/v1/fences/" + seg(resource);
    const o = await this.#json({ method: "GET", path, retryable: true, signal: options.signal });
    return bigOf(o, "last_fence", `GET ${path}`);
  }

  /**
   * Applies a transaction, all or nothing: POST /v1/txn. Returns the revision
   * its writes share. It is resent only when it certainly did not take effect.
   * String values go as `value`, bytes as `value_base64`.
   */
  async txn(t: Txn, options: { sequencer?: string } & CallOptions = {}): Promise<bigint> {
    const fences: Record<string, bigint> = {};
    const entries = t.fences instanceof Map ? [...t.fences.entries()] : Object.entries(t.fences ?? {});
    for (const [r, tok] of entries) {
      Object.defineProperty(fences, r, { value: toToken(tok, `fence of ${JSON.stringify(r)}`), enumerable: true, writable: true, configurable: true });
    }
    const body = {
      fences,
      if: (t.if ?? []).map((c) => ({ resource: c.resource, key: c.key, revision: toRevisionOrZero(c.revision) })),
      then: (t.then ?? []).map((o) => {
        if (o.op === "put") {
          return typeof o.value === "string"
            ? { op: "put", resource: o.resource, key: o.key, value: o.value }
            : { op: "put", resource: o.resource, key: o.key, value_base64: bytesToBase64(valueBytes(o.value)) };
        }
        if (o.op === "delete") return { op: "delete", resource: o.resource, key: o.key };
        throw new TypeError(`fence: txn op ${JSON.stringify((o as { op: unknown }).op)}: want put or delete`);
      }),
    };
    const headers: Record<string, string> = {};
    if (options.sequencer) headers["Fence-Sequencer"] = options.sequencer;
    const o = await this.#json({ method: "POST", path: "/v1/txn", headers, body: stringifyJSON(body), retryable: false, signal: options.signal });
    return bigOf(o, "revision", "POST /v1/txn");
  }

  /**
   * Watches the changes to locks and fenced writes of the resources under
   * options.prefix: GET /v1/watch (Server-Sent Events) as an async iterable
   * of typed events, that reconnects with Last-Event-ID after a disconnect
   * so that nothing the server still has is missed (see Watcher):
   * `for await (const ev of client.watch({prefix: "orders/"})) ...`.
   */
  watch(options: WatchOptions = {}): Watcher {
    return new Watcher(this.#t, options);
  }
}

/**
 * Returns limit if it is a number of permits a semaphore may have, an integer
 * in 1..MAX_LIMIT; throws a TypeError (not an integer) or a RangeError
 * otherwise.
 */
function checkLimit(limit: number): number {
  if (typeof limit !== "number" || !Number.isInteger(limit)) {
    throw new TypeError(`fence: limit must be an integer in 1..${MAX_LIMIT} (the permits of a semaphore), not ${show(limit)}`);
  }
  if (limit < 1 || limit > MAX_LIMIT) {
    throw new RangeError(`fence: limit must be in 1..${MAX_LIMIT} (the permits of a semaphore), not ${limit}`);
  }
  return limit;
}

function show(v: unknown): string {
  if (typeof v === "bigint") return `${v}n`;
  if (typeof v === "string") return JSON.stringify(v);
  return String(v);
}

function checkMs(v: number, name: string): void {
  if (typeof v !== "number" || !Number.isFinite(v) || v < 0) throw new TypeError(`fence: ${name} must be a non-negative number of milliseconds`);
}

/** The path of a listing's page: path with its prefix, after and limit. */
function pagePath(path: string, options: ListOptions): string {
  const q = new URLSearchParams();
  if (options.prefix) q.set("prefix", options.prefix);
  if (options.after) q.set("after", options.after);
  if (options.limit !== undefined) {
    if (!Number.isInteger(options.limit)) throw new TypeError("fence: limit must be an integer");
    q.set("limit", String(options.limit));
  }
  const qs = q.toString();
  return path + (qs ? "?" + qs : "");
}

/** The pages of a listing: fetch(after) from after on, until a page has no next. */
async function* pages<P extends { next?: string }>(fetch: (after: string | undefined) => Promise<P>, after: string | undefined): AsyncGenerator<P, void, undefined> {
  for (;;) {
    const page = await fetch(after);
    yield page;
    if (page.next === undefined) return;
    after = page.next;
  }
}
