// A lease that keeps itself alive: the Go fence.Session, with timers.

import type { AskedLease, CallOptions, Client, ClaimResult, DeleteResult, Item, LeaseInfo, PutResult, Transferred, Txn, Value, WriteOptions } from "./client.js";
import { BadRequestError, ForbiddenError, InvalidTokenError, LeaseExpiredError, LeaseLostError, LeaseReleasedError, NotFoundError, RateLimitedError, SessionEndedError } from "./errors.js";
import type { FetchFunction } from "./transport.js";
import type { TokenLike } from "./token.js";

/** The TTL of a lease when AcquireOptions.ttlMs is not given, in milliseconds. */
export const DEFAULT_TTL_MS = 10_000;

/** Options of Client.acquire. */
export interface AcquireOptions extends CallOptions {
  /** The lease's time to live, in milliseconds (10..86400000). Default 10000. */
  ttlMs?: number;
  /** How long to wait for the lock if another holder has it. Default 0: fail at once with LockHeldError. */
  waitMs?: number;
  /** The holder id. Default: a new random id per lease (newHolderId). */
  holder?: string;
  /**
   * How long before the TTL runs out the lease declares itself lost, to allow
   * for clocks that run at different rates. Default (and with 0): a tenth of
   * the TTL. Must be less than the TTL.
   */
  safetyMarginMs?: number;
  /**
   * Hold one of the limit permits of the semaphore named by the resource
   * (an integer in 1..1000) rather than a lock: the lease's resource is then
   * the permit's slot, `{resource}/permit-I-of-N`, which its renewals,
   * release, transfer and writes use. Default: a lock.
   */
  limit?: number;
  /** Hold the resource shared (a read lock), renewed and released with the holder's name. Default: exclusive. */
  shared?: boolean;
}

const now = (): number => globalThis.performance.now();

/** The holder id of an acquire: options.holder, or a new random one. */
function holderOf(options: AcquireOptions): string {
  return options.holder === undefined || options.holder === "" ? newHolderId() : options.holder;
}

/** The safety margin of an acquire of ttlMs: options.safetyMarginMs, or a tenth of the TTL. */
function marginOf(options: AcquireOptions, ttlMs: number): number {
  let margin = options.safetyMarginMs ?? 0;
  if (typeof margin !== "number" || Number.isNaN(margin)) throw new TypeError("fence: safetyMarginMs must be a number");
  if (margin === 0) margin = ttlMs / 10;
  if (margin < 0 || margin >= ttlMs) {
    throw new RangeError(`fence: safety margin ${margin}ms must be in [0, ttl ${ttlMs}ms)`);
  }
  return margin;
}

/** Returns a random holder id, unique with overwhelming probability: "h-" and 24 hex digits. */
export function newHolderId(): string {
  const b = new Uint8Array(12);
  const c = globalThis.crypto;
  if (c && typeof c.getRandomValues === "function") c.getRandomValues(b);
  else for (let i = 0; i < b.length; i++) b[i] = Math.floor(Math.random() * 256);
  return "h-" + Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

const MUTATING = new Set(["POST", "PUT", "PATCH", "DELETE"]);

/**
 * A held lock that keeps itself alive. It renews about every TTL/3 and
 * declares the lease lost by its own monotonic clock (performance.now()) when
 * no renewal has succeeded by its local deadline: the TTL minus the safety
 * margin, counted from when the last successful request was sent, without
 * waiting for the server, which may be unreachable. A lease_lost answer ends
 * it at once. It never re-acquires.
 *
 * Work done under the lease should watch `signal` (aborted when the lease
 * ends, with the reason: a LeaseLostError, a LeaseExpiredError or a
 * LeaseReleasedError) and carry `token` on every write, which the storage
 * calls of the lease and `lease.fetch` do, so that the storage rejects it once
 * a newer holder exists.
 */
export class Lease {
  /** The locked resource, as the grant names it: for a permit of a semaphore (limit), its slot `{semaphore}/permit-I-of-N`. */
  readonly resource: string;
  /** The holder id the lease was granted to. */
  readonly holder: string;
  /** The lease's fencing token: send it with every write. */
  readonly token: bigint;
  /** The lease's TTL as granted, in milliseconds. */
  readonly ttlMs: number;
  /** The lease's signed sequencer; undefined if the lock service signs nothing. */
  readonly sequencer: string | undefined;
  /** True for a shared hold: token is its group's. */
  readonly shared: boolean;
  /**
   * Resolves once the server says that a caller asked the holder to let go
   * (Client.askToRelease), with when it revokes the lease unless released
   * first. The lease learns it from a renewal, within about ttlMs/3 (a
   * lease in a session, from its session's).
   */
  readonly revokeRequested: Promise<Date>;
  #resolveRevoke!: (at: Date) => void;
  #revokeAt: Date | undefined;
  /** Aborted when the lease ends (lost, expired or released); its reason says why. */
  readonly signal: AbortSignal;
  /** Resolves, with the reason, when the lease ends. It never rejects. */
  readonly done: Promise<Error>;

  readonly #client: Client;
  readonly #margin: number;
  /** The lease on the session resource that keeps this lease alive; undefined for a lease that renews itself. */
  readonly keeper: Lease | undefined;
  #info: LeaseInfo;
  #deadline: number; // performance.now() before which the lease is surely held
  readonly #ended = new AbortController();
  #resolveDone!: (e: Error) => void;
  #stopped = false; // release was called: no more renewals
  #loopStop = new AbortController(); // aborts a renewal in flight on release
  #wakeTimer: ReturnType<typeof setTimeout> | undefined;
  #background = false; // its wake timers keep no Node process alive
  #wake: (() => void) | undefined;
  #loopDone: Promise<void> = Promise.resolve();
  #ending: Promise<void> = Promise.resolve(); // the release or transfer in flight, if any
  #expiryTimer: ReturnType<typeof setTimeout> | undefined;
  #releasing: Promise<void> | undefined;
  // A session's lease (the keeper of leases in it): the leases in the
  // session asked to let go, as its last renewal listed them, and a promise
  // resolved (and replaced) when that list changes.
  #asked: AskedLease[] = [];
  #askedChanged!: Promise<void>;
  #resolveAskedChanged!: () => void;
  #listed = false; // in a session: the keeper's renewals listed it as asked to let go

  private constructor(client: Client, info: LeaseInfo, margin: number, deadline: number, keeper?: Lease) {
    this.#client = client;
    this.keeper = keeper;
    this.#info = { ...info };
    this.#margin = margin;
    this.#deadline = deadline;
    this.resource = info.resource;
    this.holder = info.holder;
    this.token = info.token;
    this.ttlMs = info.ttlMs;
    this.sequencer = info.sequencer;
    this.shared = info.shared === true;
    this.revokeRequested = new Promise((resolve) => (this.#resolveRevoke = resolve));
    if (info.revokeAt !== undefined) this.#noteRevoke(info.revokeAt);
    this.signal = this.#ended.signal;
    this.done = new Promise((resolve) => (this.#resolveDone = resolve));
    this.#newAskedChanged();
  }

  #newAskedChanged(): void {
    this.#askedChanged = new Promise((resolve) => (this.#resolveAskedChanged = resolve));
  }

  /** Takes the list of asked leases of a session's renewal, and wakes the leases in the session if it changed. */
  #noteAsked(asked: AskedLease[]): void {
    const same = asked.length === this.#asked.length &&
      asked.every((a, i) => a.resource === this.#asked[i].resource && a.token === this.#asked[i].token && a.revokeAt.getTime() === this.#asked[i].revokeAt.getTime());
    if (same) return;
    this.#asked = asked;
    const wake = this.#resolveAskedChanged;
    this.#newAskedChanged();
    wake();
  }

  /**
   * Acquires resource through client and starts the keepalive; in the
   * session that keeper keeps alive, if given: the lease then sends no
   * renewal and ends when keeper does. With background, its renewal timers
   * keep no Node process alive (a client's own session). Use Client.acquire.
   */
  static async acquire(client: Client, resource: string, options: AcquireOptions = {}, keeper?: Lease, background = false): Promise<Lease> {
    if (keeper !== undefined) {
      const info = await client.acquireOnce(resource, { holder: holderOf(options), waitMs: options.waitMs, limit: options.limit, session: keeper, signal: options.signal });
      return Lease.#inSession(client, info, keeper);
    }
    const ttlMs = options.ttlMs ?? DEFAULT_TTL_MS;
    const holder = holderOf(options);
    const margin = marginOf(options, ttlMs);
    const sent = now();
    const info = await client.acquireOnce(resource, { holder, ttlMs, waitMs: options.waitMs, limit: options.limit, shared: options.shared, signal: options.signal });
    const lease = new Lease(client, info, margin, sent + info.ttlMs - margin);
    lease.#background = background;
    if (now() - sent > margin) {
      // The grant happened at some unknown moment during a long acquire (a
      // wait, a slow network): count from a renewal instead.
      try {
        await lease.#renew(now() + info.ttlMs - margin, options.signal);
      } catch (e) {
        lease.#end(e instanceof Error ? e : new Error(String(e)));
        // Best effort: else it expires by its TTL.
        const ctrl = new AbortController();
        const t = setTimeout(() => ctrl.abort(), info.ttlMs);
        // The grant's resource: for a permit, its slot, not the semaphore.
        await client.release(info.resource, info.token, { holder: info.shared ? info.holder : undefined, signal: ctrl.signal }).catch(() => undefined);
        clearTimeout(t);
        throw e;
      }
    }
    lease.#loopDone = lease.#keepalive();
    return lease;
  }

  /**
   * Acquires every one of resources through client at once, all or none,
   * and starts each lease's keepalive. Use Client.acquireAll. limit and
   * shared do not apply.
   */
  static async acquireAll(client: Client, resources: string[], options: AcquireOptions = {}, keeper?: Lease): Promise<Lease[]> {
    if (options.limit !== undefined || options.shared) throw new TypeError("fence: a multi-acquire takes neither limit nor shared");
    if (keeper !== undefined) {
      const infos = await client.acquireAllOnce(resources, { holder: holderOf(options), waitMs: options.waitMs, session: keeper, signal: options.signal });
      return infos.map((info) => Lease.#inSession(client, info, keeper));
    }
    const ttlMs = options.ttlMs ?? DEFAULT_TTL_MS;
    const holder = holderOf(options);
    const margin = marginOf(options, ttlMs);
    const sent = now();
    const infos = await client.acquireAllOnce(resources, { holder, ttlMs, waitMs: options.waitMs, signal: options.signal });
    const leases = infos.map((info) => new Lease(client, info, margin, sent + info.ttlMs - margin));
    if (now() - sent > margin) {
      // As in acquire: count from a renewal of each instead.
      try {
        for (const lease of leases) await lease.#renew(now() + lease.ttlMs - margin, options.signal);
      } catch (e) {
        const err = e instanceof Error ? e : new Error(String(e));
        for (const lease of leases) {
          lease.#end(err);
          await client.release(lease.resource, lease.token).catch(() => undefined); // best effort: else they expire
        }
        throw e;
      }
    }
    for (const lease of leases) lease.#loopDone = lease.#keepalive();
    return leases;
  }

  /** Starts the lease of info, granted in the session that keeper keeps alive: it follows the session. */
  static #inSession(client: Client, info: LeaseInfo, keeper: Lease): Lease {
    const lease = new Lease(client, info, keeper.#margin, keeper.deadline, keeper);
    lease.#loopDone = lease.#keepalive();
    return lease;
  }

  /** When the lease expires as the server last described it. */
  get expiresAt(): Date {
    return new Date(this.#info.expiresAt.getTime());
  }

  /** The lease as the server last described it. */
  get info(): LeaseInfo {
    return { ...this.#info, expiresAt: this.expiresAt };
  }

  /**
   * The local deadline, on the performance.now() clock: by this process's
   * clock the lease is surely held before it, unless the server said otherwise.
   */
  get deadline(): number {
    return this.keeper !== undefined ? this.keeper.deadline : this.#deadline;
  }

  /** Milliseconds left before the local deadline (0 once it has passed or the lease ended). */
  get remainingMs(): number {
    return this.signal.aborted ? 0 : Math.max(0, this.deadline - now());
  }

  /** Undefined while the lease is held, then why it ended (the signal's reason). */
  get err(): Error | undefined {
    return this.signal.aborted ? (this.signal.reason as Error) : undefined;
  }

  /** Throws why the lease ended, if it has; returns otherwise. */
  throwIfEnded(): void {
    if (this.signal.aborted) throw this.signal.reason;
  }

  #end(reason: Error): void {
    if (this.#ended.signal.aborted) return;
    this.#stopped = true;
    if (this.#wakeTimer !== undefined) clearTimeout(this.#wakeTimer);
    if (this.#expiryTimer !== undefined) clearTimeout(this.#expiryTimer);
    this.#loopStop.abort(reason);
    this.#ended.abort(reason);
    this.#wake?.();
    this.#resolveDone(reason);
  }

  /** When the server revokes the lease, as it last said; undefined if nobody asked the holder to let go. */
  get revokeAt(): Date | undefined {
    return this.#revokeAt;
  }

  #noteRevoke(at: Date): void {
    this.#revokeAt = at;
    this.#resolveRevoke(at);
  }

  /** Renews the lease once, giving up at until (performance.now()), and on success moves the local deadline. */
  async #renew(until: number, extra?: AbortSignal): Promise<void> {
    const sent = now();
    const ctrl = new AbortController();
    const onStop = () => ctrl.abort(this.#loopStop.signal.reason);
    const onExtra = () => ctrl.abort(extra!.reason);
    this.#loopStop.signal.addEventListener("abort", onStop, { once: true });
    extra?.addEventListener("abort", onExtra, { once: true });
    const t = setTimeout(() => {
      const e = new Error(`fence: renewal of lease ${this.token} on ${JSON.stringify(this.resource)} did not finish before the local deadline`);
      e.name = "TimeoutError";
      ctrl.abort(e);
    }, Math.max(0, until - sent));
    try {
      if (this.#loopStop.signal.aborted) throw this.#loopStop.signal.reason;
      if (extra?.aborted) throw extra.reason;
      const deadline = new Date(Date.now() + Math.max(0, until - sent));
      const info = await this.#client.renew(this.resource, this.token, { ttlMs: this.ttlMs, holder: this.shared ? this.holder : undefined, signal: ctrl.signal, deadline });
      if (this.#ended.signal.aborted) return;
      this.#info.expiresAt = info.expiresAt;
      if (info.revokeAt !== undefined) this.#noteRevoke(info.revokeAt);
      this.#noteAsked(info.asked ?? []);
      this.#deadline = sent + this.ttlMs - this.#margin;
    } finally {
      clearTimeout(t);
      this.#loopStop.signal.removeEventListener("abort", onStop);
      extra?.removeEventListener("abort", onExtra);
    }
  }

  #sleepUntil(at: number): Promise<void> {
    return new Promise((resolve) => {
      this.#wake = resolve;
      const t = setTimeout(resolve, Math.max(0, at - now()));
      if (this.#background) (t as { unref?: () => void }).unref?.();
      this.#wakeTimer = t;
    });
  }

  /** Renews every TTL/3 until release, a lease_lost answer, or the local deadline passing without a successful renewal. */
  async #keepalive(): Promise<void> {
    const keeper = this.keeper;
    if (keeper !== undefined) {
      // In a session: no renewals; the lease ends with the session. The
      // session's renewals list the leases in it asked to let go: listed,
      // revokeRequested resolves; listed and then no longer (not released:
      // release stops this loop first), the lease was revoked.
      const stop = this.#loopStop.signal;
      const stopped = new Promise<void>((resolve) => {
        if (stop.aborted) resolve();
        else stop.addEventListener("abort", () => resolve(), { once: true });
      });
      for (;;) {
        const changed = keeper.#askedChanged;
        const asked = keeper.#asked.find((a) => a.resource === this.resource && a.token === this.token);
        if (asked !== undefined && !this.#stopped) {
          this.#listed = true;
          this.#noteRevoke(asked.revokeAt);
        } else if (this.#listed && !this.#stopped) {
          this.#end(new LeaseLostError(409, "revoked at the deadline of a request to let go",
            { code: "lease_lost", resource: this.resource, presented: this.token, current: 0n }));
          return;
        }
        const reason = await Promise.race([keeper.done, stopped.then(() => null), changed.then(() => undefined)]);
        if (reason === null || this.#stopped) return;
        if (reason !== undefined) {
          this.#end(new SessionEndedError(this.resource, this.token, keeper.resource, reason));
          return;
        }
      }
    }
    const interval = this.ttlMs / 3;
    const retry = Math.max(this.ttlMs / 20, 1);
    let nextAt = now() + interval;
    let lastErr: unknown = undefined;
    for (;;) {
      await this.#sleepUntil(Math.min(nextAt, this.#deadline));
      this.#wake = undefined;
      this.#wakeTimer = undefined;
      if (this.#stopped) return;
      const t = now();
      if (t >= this.#deadline) {
        // Also after this process was frozen: whichever timer fired, the deadline decides.
        this.#end(new LeaseExpiredError(this.resource, this.token, lastErr));
        return;
      }
      if (t < nextAt) continue; // a timer that fired early
      try {
        await this.#renew(this.#deadline);
        lastErr = undefined;
        nextAt = now() + interval;
      } catch (e) {
        if (this.#stopped) return; // released
        if (e instanceof LeaseLostError) {
          this.#end(e);
          return;
        }
        lastErr = e;
        nextAt = now() + retry;
      }
    }
  }

  /**
   * Stops the renewals and releases the lease. It resolves when the lease is
   * no longer held (released now, or ended before: see err), and rejects when
   * the release's outcome is unknown; the lease then ends by its local
   * deadline (as expired) and the server lets it expire by its TTL. Calling
   * it again retries the release.
   */
  release(options: CallOptions = {}): Promise<void> {
    if (this.#releasing) return this.#releasing;
    const p = this.#ending.then(() => this.#doRelease(options)).finally(() => {
      this.#releasing = undefined;
    });
    this.#releasing = p;
    this.#ending = p.then(() => undefined, () => undefined);
    return p;
  }

  async #doRelease(options: CallOptions): Promise<void> {
    await this.#stopRenewals();
    if (this.signal.aborted) return;
    try {
      await this.#client.release(this.resource, this.token, { ...options, holder: this.shared ? this.holder : undefined });
    } catch (e) {
      if (!(e instanceof LeaseLostError)) {
        if (this.keeper !== undefined) {
          // Perhaps still held, and kept by its session: it follows the
          // session again, and release may be retried.
          this.#stopped = false;
          this.#loopStop = new AbortController();
          this.#loopDone = this.#keepalive();
        } else this.#expireLocally(e);
        throw e;
      }
    }
    this.#end(new LeaseReleasedError(this.resource, this.token));
  }

  /**
   * Stops the renewals and hands the lease to the first waiter whose holder
   * is to (absent: the first waiter) in one change, and resolves to the
   * successor's lease: its token is greater, so what this holder still
   * writes is fenced. The lease then ends as released. A lease that has
   * ended, or that the server no longer has, transfers nothing and rejects.
   * Nobody of that name waiting rejects with NotFoundError (a request
   * refused as bad, forbidden or rate limited with its error) and changes
   * nothing: the lease goes on, renewed. After any other failure, whose
   * outcome is unknown, the lease is no longer renewed, as after a failed
   * release: release it, or it ends by its local deadline.
   */
  transfer(to?: string, options: CallOptions = {}): Promise<Transferred> {
    // One end at a time: a release or another transfer in flight finishes first.
    const p = this.#ending.then(() => this.#doTransfer(to, options));
    this.#ending = p.then(() => undefined, () => undefined);
    return p;
  }

  async #doTransfer(to: string | undefined, options: CallOptions): Promise<Transferred> {
    await this.#stopRenewals();
    this.throwIfEnded();
    let next: Transferred;
    try {
      next = await this.#client.transfer(this.resource, this.token, to, options);
    } catch (e) {
      if (e instanceof LeaseLostError) this.#end(e);
      else if (e instanceof NotFoundError || e instanceof BadRequestError || e instanceof InvalidTokenError ||
        e instanceof ForbiddenError || e instanceof RateLimitedError) {
        // Certainly nothing changed: renew again, and forget a local
        // deadline that an earlier failure armed.
        if (this.#expiryTimer !== undefined) clearTimeout(this.#expiryTimer);
        this.#expiryTimer = undefined;
        this.#stopped = false;
        this.#loopStop = new AbortController();
        this.#loopDone = this.#keepalive();
      } else this.#expireLocally(e);
      throw e;
    }
    this.#end(new LeaseReleasedError(this.resource, this.token));
    return next;
  }

  async #stopRenewals(): Promise<void> {
    if (!this.#stopped) {
      this.#stopped = true;
      if (this.#wakeTimer !== undefined) clearTimeout(this.#wakeTimer);
      this.#loopStop.abort(new LeaseReleasedError(this.resource, this.token)); // a renewal in flight gives up at once
      this.#wake?.();
    }
    await this.#loopDone;
  }

  /** Not renewed any more after cause: the lease ends by its local deadline. */
  #expireLocally(cause: unknown): void {
    if (this.#expiryTimer === undefined) {
      this.#expiryTimer = setTimeout(() => this.#end(new LeaseExpiredError(this.resource, this.token, cause)),
        Math.max(0, this.#deadline - now()));
    }
  }

  // Storage through the lease: every write carries its token and sequencer,
  // and is refused without being sent once the lease has ended.

  #w<T extends CallOptions>(options: T | undefined): T & { sequencer?: string } {
    this.throwIfEnded();
    const o = { ...(options ?? {}) } as T & { sequencer?: string };
    if (this.sequencer !== undefined) o.sequencer = this.sequencer;
    return o;
  }

  /** Writes value under key in the lease's resource, with its token (and If-Match/If-None-Match from options). */
  put(key: string, value: Value, options?: WriteOptions): Promise<PutResult> {
    try {
      return this.#client.put(this.resource, key, value, this.token, this.#w(options));
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** Writes value under key only if the key is at revision (0: only if it does not exist); else PreconditionFailedError. */
  compareAndSwap(key: string, value: Value, revision: TokenLike, options?: CallOptions): Promise<PutResult> {
    if (revision === 0 || revision === 0n) return this.put(key, value, { ...options, ifNoneMatch: "*" });
    return this.put(key, value, { ...options, ifMatch: revision });
  }

  /** Reads key from the lease's resource. */
  get(key: string, options?: CallOptions): Promise<Item> {
    return this.#client.get(this.resource, key, options);
  }

  /** Deletes key from the lease's resource, with its token. */
  delete(key: string, options?: WriteOptions): Promise<DeleteResult> {
    try {
      return this.#client.delete(this.resource, key, this.token, this.#w(options));
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** Raises the resource's fence to the lease's token without writing, so that any older holder is rejected from now on. */
  claim(options?: CallOptions): Promise<ClaimResult> {
    try {
      return this.#client.claim(this.resource, this.token, this.#w(options));
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** Returns the resource's last fence. */
  fence(options?: CallOptions): Promise<bigint> {
    return this.#client.fence(this.resource, options);
  }

  /** Applies t with the lease's token as the fence of its resource; fences of other resources stay as t has them. */
  txn(t: Txn, options?: CallOptions): Promise<bigint> {
    try {
      const o = this.#w(options);
      const fences = new Map<string, TokenLike>(t.fences instanceof Map ? t.fences : Object.entries(t.fences ?? {}));
      fences.set(this.resource, this.token);
      return this.#client.txn({ ...t, fences }, o);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /**
   * fetch that stamps "Fencing-Token: <token>" (and "Fence-Sequencer" when the
   * lease has one) on every mutating request (POST, PUT, PATCH, DELETE), so
   * that any service that checks fencing tokens can reject this holder once
   * it is stale. Other methods go unchanged. After the lease has ended it
   * rejects mutating requests, with the reason, without sending them.
   */
  fetch(input: string | URL | Request, init?: RequestInit): Promise<Response> {
    return stampedFetch(this)(input, init);
  }
}

/**
 * Returns a fetch function that stamps lease's token and sequencer on every
 * mutating request it sends through base (globalThis.fetch by default): see
 * Lease.fetch.
 */
export function stampedFetch(lease: Lease, base?: FetchFunction): FetchFunction {
  return (input, init) => {
    const f = base ?? (globalThis.fetch.bind(globalThis) as FetchFunction);
    const isRequest = typeof Request !== "undefined" && input instanceof Request;
    const method = (init?.method ?? (isRequest ? (input as Request).method : "GET")).toUpperCase();
    if (!MUTATING.has(method)) return f(input, init);
    if (lease.signal.aborted) return Promise.reject(lease.signal.reason);
    const headers = new Headers(init?.headers ?? (isRequest ? (input as Request).headers : undefined));
    headers.set("Fencing-Token", lease.token.toString());
    if (lease.sequencer !== undefined) headers.set("Fence-Sequencer", lease.sequencer);
    return f(input, { ...init, headers });
  };
}

/** Options of withLock. */
export type WithLockOptions = AcquireOptions;

/**
 * Runs fn under a lease on resource and releases it after, even when fn
 * throws. fn gets the lease and a signal that aborts as soon as the lease ends
 * (or options.signal aborts): work under it should stop then. withLock
 * returns fn's result; it rethrows fn's error; if fn succeeded but the lease
 * ended while it ran, it throws why (a LeaseLostError or LeaseExpiredError: some
 * writes may have been fenced); else the release's error, if any.
 */
export async function withLock<T>(
  client: Client,
  resource: string,
  options: WithLockOptions,
  fn: (lease: Lease, signal: AbortSignal) => Promise<T> | T,
): Promise<T> {
  const lease = await client.acquire(resource, options);
  const signal = anySignal([lease.signal, options.signal]);
  let result: T;
  let fnErr: { e: unknown } | undefined;
  try {
    result = await fn(lease, signal.signal);
  } catch (e) {
    fnErr = { e };
  }
  signal.dispose();
  const lost = lease.err;
  let relErr: { e: unknown } | undefined;
  try {
    await lease.release();
  } catch (e) {
    relErr = { e };
  }
  if (fnErr) throw fnErr.e;
  if (lost !== undefined) throw lost;
  if (relErr) throw relErr.e;
  return result!;
}

/** A signal that aborts when any of signals does (AbortSignal.any, which Node 18 lacks). */
export function anySignal(signals: (AbortSignal | undefined)[]): { signal: AbortSignal; dispose(): void } {
  const ctrl = new AbortController();
  const subs: (() => void)[] = [];
  for (const s of signals) {
    if (s === undefined) continue;
    if (s.aborted) {
      ctrl.abort(s.reason);
      break;
    }
    const on = () => ctrl.abort(s.reason);
    s.addEventListener("abort", on, { once: true });
    subs.push(() => s.removeEventListener("abort", on));
  }
  return { signal: ctrl.signal, dispose: () => subs.forEach((u) => u()) };
}

