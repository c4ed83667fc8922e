// Errors: one class per problem code of the v1 API, all of them FenceError,
// and the client's own errors (transport, an outcome that is unknown, a lease
// that ended by this process's clock).

import { parseJSON, type JSONValue } from "./json.js";

/** The members of a problem body that are tokens, read as bigint. */
export const PROBLEM_BIGINTS: ReadonlySet<string> = new Set(["presented", "last_fence", "last_token", "current"]);

/** An RFC 9457 problem as a fence server sends it, tokens as bigint. */
export interface Problem {
  type?: string;
  title?: string;
  status?: number;
  detail?: string;
  code?: string;
  resource?: string;
  presented?: bigint;
  last_fence?: bigint;
  last_token?: bigint;
  current?: bigint;
  retry_after_ms?: number;
  [member: string]: JSONValue | undefined;
}

/**
 * An error answered by a fence server (or, for a body that is not a problem
 * of the API, by whatever answered): its HTTP status, the problem's stable
 * code ("" if the body was not a problem), its detail and the whole problem.
 * Each code of the API has a subclass; an unknown code is a plain FenceError.
 */
export class FenceError extends Error {
  /** The HTTP status. */
  readonly status: number;
  /** The problem's code, such as "fenced"; "" if the body was not a problem. */
  readonly code: string;
  /** What went wrong in this occurrence, as the server said. */
  readonly detail: string;
  /** The problem body as the server sent it, tokens as bigint; undefined if the body was not a problem. */
  readonly problem: Problem | undefined;
  constructor(status: number, code: string, detail: string, problem?: Problem, message?: string) {
    super(message ?? defaultMessage(status, code, detail));
    this.name = new.target.name;
    this.status = status;
    this.code = code;
    this.detail = detail;
    this.problem = problem;
  }
}

function defaultMessage(status: number, code: string, detail: string): string {
  if (code === "") return `fence: HTTP ${status}: ${detail}`;
  if (detail === "") return `fence: HTTP ${status} ${code}`;
  return detail.startsWith("fence:") ? detail : `fence: ${code}: ${detail}`;
}

const tok = (v: unknown): bigint => (typeof v === "bigint" ? v : typeof v === "number" && Number.isInteger(v) ? BigInt(v) : 0n);
const str = (v: unknown): string => (typeof v === "string" ? v : "");

/** 409 fenced: the presented token is lower than the resource's last fence (a stale holder). */
export class FencedError extends FenceError {
  readonly resource: string;
  /** The token the request carried. */
  readonly presented: bigint;
  /** The resource's fence when the write was rejected. */
  readonly lastFence: bigint;
  constructor(status: number, detail: string, problem: Problem | undefined) {
    const resource = str(problem?.resource), presented = tok(problem?.presented), lastFence = tok(problem?.last_fence);
    super(status, "fenced", detail, problem,
      `fence: ${JSON.stringify(resource)}: token ${presented} is stale (last fence ${lastFence})`);
    this.resource = resource;
    this.presented = presented;
    this.lastFence = lastFence;
  }
}

/** 409 token_not_issued: a token greater than any the lock service issued for the resource. */
export class TokenNotIssuedError extends FenceError {
  readonly resource: string;
  readonly presented: bigint;
  /** The highest token issued for the resource. */
  readonly lastToken: bigint;
  constructor(status: number, detail: string, problem: Problem | undefined) {
    const resource = str(problem?.resource), presented = tok(problem?.presented), lastToken = tok(problem?.last_token);
    super(status, "token_not_issued", detail, problem,
      `fence: ${JSON.stringify(resource)}: token ${presented} was never issued (last token ${lastToken})`);
    this.resource = resource;
    this.presented = presented;
    this.lastToken = lastToken;
  }
}

/** 409 lock_held: another holder kept the lock for the whole wait. */
export class LockHeldError extends FenceError {
  readonly resource: string;
  /** Until the current lease expires, if nobody renews it (retry_after_ms, else the Retry-After header). */
  readonly retryAfterMs: number;
  constructor(status: number, detail: string, problem: Problem | undefined, retryAfterMs: number) {
    const resource = str(problem?.resource);
    super(status, "lock_held", detail, problem,
      `fence: ${JSON.stringify(resource)}: lock held by another holder (expires in ${retryAfterMs}ms)`);
    this.resource = resource;
    this.retryAfterMs = retryAfterMs;
  }
}

/** 409 lease_lost: a renew or release whose token is not the resource's current, unexpired lease. */
export class LeaseLostError extends FenceError {
  readonly resource: string;
  readonly presented: bigint;
  /** The current lease's token, 0n if the resource is not held. */
  readonly current: bigint;
  constructor(status: number, detail: string, problem: Problem | undefined) {
    const resource = str(problem?.resource), presented = tok(problem?.presented), current = tok(problem?.current);
    super(status, "lease_lost", detail, problem,
      `fence: ${JSON.stringify(resource)}: lease ${presented} lost (current ${current})`);
    this.resource = resource;
    this.presented = presented;
    this.current = current;
  }
}

/** 429 rate_limited: more requests than the server's --rate-limit allows. */
export class RateLimitedError extends FenceError {
  /** When the client may send again (retry_after_ms, else the Retry-After header). */
  readonly retryAfterMs: number;
  constructor(status: number, detail: string, problem: Problem | undefined, retryAfterMs: number) {
    super(status, "rate_limited", detail, problem);
    this.retryAfterMs = retryAfterMs;
  }
}

type Simple = new (status: number, detail: string, problem: Problem | undefined) => FenceError;
function simple(code: string): Simple {
  return class extends FenceError {
    constructor(status: number, detail: string, problem: Problem | undefined) {
      super(status, code, detail, problem);
    }
  };
}

/** 428 fence_required: a mutating storage request without a Fencing-Token. */
export class FenceRequiredError extends simple("fence_required") {}
/** 400 invalid_token: a token that is not a decimal integer in 1..2^63-1. */
export class InvalidTokenError extends simple("invalid_token") {}
/** 403 invalid_sequencer: a sequencer that is malformed, badly signed, or not for the resource and token. */
export class InvalidSequencerError extends simple("invalid_sequencer") {}
/** 412 precondition_failed: an If-Match, If-None-Match or txn compare that does not hold. */
export class PreconditionFailedError extends simple("precondition_failed") {}
/** 404 not_found: a key that does not exist (or a route that does not). */
export class NotFoundError extends simple("not_found") {}
/** 400 bad_request: malformed JSON, unknown fields, a name or TTL out of range. */
export class BadRequestError extends simple("bad_request") {}
/** 413 too_large: a body over its limit. */
export class TooLargeError extends simple("too_large") {}
/** 401 unauthorized: no valid bearer token. */
export class UnauthorizedError extends simple("unauthorized") {}
/** 403 forbidden: the token has no grant of the permission needed. */
export class ForbiddenError extends simple("forbidden") {}
/** 503 not_leader: the server does not lead and could not forward. Nothing was applied. */
export class NotLeaderError extends simple("not_leader") {}
/** 503 unavailable: shutting down, or cut short; the outcome of a change is unknown. */
export class UnavailableError extends simple("unavailable") {}
/** 500 internal: the server failed; the cause is in its log. */
export class InternalError extends simple("internal") {}
/** 405 method_not_allowed: the route does not take this method. */
export class MethodNotAllowedError extends simple("method_not_allowed") {}
/** 503 not_ready: GET /readyz of a server that would not serve a request now. */
export class NotReadyError extends simple("not_ready") {}

const classes: Record<string, Simple> = {
  fence_required: FenceRequiredError,
  invalid_token: InvalidTokenError,
  invalid_sequencer: InvalidSequencerError,
  precondition_failed: PreconditionFailedError,
  not_found: NotFoundError,
  bad_request: BadRequestError,
  too_large: TooLargeError,
  unauthorized: UnauthorizedError,
  forbidden: ForbiddenError,
  not_leader: NotLeaderError,
  unavailable: UnavailableError,
  internal: InternalError,
  method_not_allowed: MethodNotAllowedError,
  not_ready: NotReadyError,
};

/** Every problem code of the v1 API that this client knows, each with its own FenceError subclass. */
export const PROBLEM_CODES: readonly string[] = Object.freeze([
  "fenced", "token_not_issued", "lock_held", "lease_lost", "rate_limited", ...Object.keys(classes),
]);

/**
 * Returns the error that a fence server answered with status, body and
 * headers: the FenceError subclass of the problem's code (FencedError for
 * "fenced", ...), a plain FenceError for an unknown code, or a FenceError
 * with code "" and the start of the body as detail for a body that is not a
 * problem (a proxy's error page, say). Call it for error statuses only.
 */
export function problemError(status: number, body: string, headers?: Headers | { get(name: string): string | null }): FenceError {
  let p: Problem | undefined;
  try {
    const v = parseJSON(body, { bigints: PROBLEM_BIGINTS });
    if (v !== null && typeof v === "object" && !Array.isArray(v) && typeof v.code === "string" && v.code !== "") {
      p = v as Problem;
    }
  } catch {
    p = undefined;
  }
  if (p === undefined) return new FenceError(status, "", snippet(body));
  const code = p.code as string;
  const detail = str(p.detail);
  const retryAfterMs = (): number => {
    const ms = p!.retry_after_ms;
    if (typeof ms === "number" && Number.isFinite(ms) && ms > 0) return ms;
    const h = headers?.get("Retry-After");
    if (h != null && /^[0-9]+$/.test(h.trim())) return Number(h.trim()) * 1000;
    return 0;
  };
  switch (code) {
    case "fenced":
      return new FencedError(status, detail, p);
    case "token_not_issued":
      return new TokenNotIssuedError(status, detail, p);
    case "lock_held":
      return new LockHeldError(status, detail, p, retryAfterMs());
    case "lease_lost":
      return new LeaseLostError(status, detail, p);
    case "rate_limited":
      return new RateLimitedError(status, detail, p, retryAfterMs());
  }
  const C = Object.prototype.hasOwnProperty.call(classes, code) ? classes[code] : undefined;
  if (C !== undefined) return new C(status, detail, p);
  return new FenceError(status, code, detail, p);
}

function snippet(body: string): string {
  const s = body.trim();
  return s.length > 256 ? s.slice(0, 256) : s;
}

/**
 * A request that failed in transport: no answer came (refused, reset, timed
 * out, the body cut short). `sent` is false when no connection could be made,
 * so that the server certainly received nothing; true when the request may
 * have arrived.
 */
export class TransportError extends Error {
  /** Whether the request may have reached the server. */
  readonly sent: boolean;
  constructor(message: string, sent: boolean, cause: unknown) {
    super(message, { cause });
    this.name = "TransportError";
    this.sent = sent;
  }
}

/**
 * A call whose last attempt failed after an earlier attempt had left the
 * outcome unknown: the request may have taken effect then, whatever the last
 * attempt says. `cause` is the last attempt's error, `earlier` the earlier one.
 */
export class MaybeAppliedError extends Error {
  readonly earlier: unknown;
  constructor(last: unknown, earlier: unknown) {
    super(`${messageOf(last)}; an earlier attempt may have taken effect: ${messageOf(earlier)}`, { cause: last });
    this.name = "MaybeAppliedError";
    this.earlier = earlier;
  }
}

/** An answer with a 2xx status that does not follow the API (undecodable JSON, a bad ETag). */
export class ProtocolError extends Error {
  constructor(message: string, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = "ProtocolError";
  }
}

/**
 * A lease's end by this process's clock: no renewal succeeded before the
 * local deadline (the TTL minus the safety margin, counted from when the last
 * successful request was sent). The lock service may have given the lock to
 * someone else. `cause` is the last renewal's error, if any.
 */
export class LeaseExpiredError extends Error {
  readonly resource: string;
  readonly token: bigint;
  constructor(resource: string, token: bigint, lastRenewal: unknown) {
    super(`fence: lease ${token} on ${JSON.stringify(resource)} expired before a renewal succeeded` +
      (lastRenewal === undefined ? "" : ` (last renewal: ${messageOf(lastRenewal)})`),
    lastRenewal === undefined ? undefined : { cause: lastRenewal });
    this.name = "LeaseExpiredError";
    this.resource = resource;
    this.token = token;
  }
}

/** A lease's end by Lease.release. */
export class LeaseReleasedError extends Error {
  readonly resource: string;
  readonly token: bigint;
  constructor(resource: string, token: bigint) {
    super(`fence: lease ${token} on ${JSON.stringify(resource)} released`);
    this.name = "LeaseReleasedError";
    this.resource = resource;
    this.token = token;
  }
}

function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

function chain(err: unknown): unknown[] {
  const out: unknown[] = [];
  for (let e = err, n = 0; e !== undefined && e !== null && n < 16; n++) {
    out.push(e);
    e = e instanceof Error ? e.cause : undefined;
  }
  return out;
}

/**
 * Reports whether err leaves the outcome of a call unknown: the request may or
 * may not have taken effect (a transport error once connected, a timeout, a
 * 5xx other than not_leader, a call aborted while in flight), as opposed to an
 * answer from the server. A call whose every attempt certainly did nothing is
 * not ambiguous: it could not connect, or it was answered 503 not_leader.
 */
export function isAmbiguous(err: unknown): boolean {
  if (err === undefined || err === null) return false;
  if (err instanceof MaybeAppliedError) return true;
  if (err instanceof FenceError) return err.status >= 500 && err.code !== "not_leader";
  if (err instanceof TransportError) return err.sent;
  if (err instanceof LeaseExpiredError || err instanceof LeaseReleasedError || err instanceof ProtocolError) return false;
  if (err instanceof TypeError || err instanceof RangeError) return false; // refused before sending
  const name = (err as { name?: unknown }).name;
  return name === "AbortError" || name === "TimeoutError";
}

/**
 * Reports whether err means the lease is gone (the server said lease_lost,
 * the local deadline passed, or a write was fenced): the caller must stop
 * working under it. It looks through error causes.
 */
export function isLost(err: unknown): boolean {
  return chain(err).some((e) => e instanceof LeaseLostError || e instanceof LeaseExpiredError || e instanceof FencedError);
}

/** A lease's end with the session it was in (released, lost or expired). */
export class SessionEndedError extends Error {
  readonly resource: string;
  readonly token: bigint;
  /** The session's resource. */
  readonly session: string;
  constructor(resource: string, token: bigint, session: string, reason: unknown) {
    super(`fence: lease ${token} on ${JSON.stringify(resource)}: its session ${JSON.stringify(session)} ended: ${messageOf(reason)}`, { cause: reason });
    this.name = "SessionEndedError";
    this.resource = resource;
    this.token = token;
    this.session = session;
  }
}
