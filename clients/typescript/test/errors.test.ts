// Every problem code maps to its error class, from problem JSON alone.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  BadRequestError,
  FenceError,
  FenceRequiredError,
  FencedError,
  ForbiddenError,
  InternalError,
  InvalidSequencerError,
  InvalidTokenError,
  LeaseLostError,
  LockHeldError,
  MaybeAppliedError,
  MethodNotAllowedError,
  NotFoundError,
  NotLeaderError,
  NotReadyError,
  PROBLEM_CODES,
  PreconditionFailedError,
  RateLimitedError,
  TokenNotIssuedError,
  TooLargeError,
  TransportError,
  UnauthorizedError,
  UnavailableError,
  isAmbiguous,
  isLost,
  problemError,
} from "../src/index.js";

const classes: Record<string, [number, new (...a: never[]) => FenceError]> = {
  fenced: [409, FencedError],
  token_not_issued: [409, TokenNotIssuedError],
  lock_held: [409, LockHeldError],
  lease_lost: [409, LeaseLostError],
  rate_limited: [429, RateLimitedError],
  fence_required: [428, FenceRequiredError],
  invalid_token: [400, InvalidTokenError],
  invalid_sequencer: [403, InvalidSequencerError],
  precondition_failed: [412, PreconditionFailedError],
  not_found: [404, NotFoundError],
  bad_request: [400, BadRequestError],
  too_large: [413, TooLargeError],
  unauthorized: [401, UnauthorizedError],
  forbidden: [403, ForbiddenError],
  not_leader: [503, NotLeaderError],
  unavailable: [503, UnavailableError],
  internal: [500, InternalError],
  method_not_allowed: [405, MethodNotAllowedError],
  not_ready: [503, NotReadyError],
};

function body(code: string, status: number, extra: string = ""): string {
  return `{"type":"urn:fence:problem:${code}","title":"T","status":${status},"detail":"fence: detail of ${code}","code":"${code}"${extra}}`;
}

describe("problemError", () => {
  test("knows every code of the server's table, each with its own class", () => {
    assert.deepEqual([...PROBLEM_CODES].sort(), Object.keys(classes).sort());
    for (const [code, [status, C]] of Object.entries(classes)) {
      const e = problemError(status, body(code, status));
      assert.ok(e instanceof C, `${code}: got ${e.constructor.name}`);
      assert.ok(e instanceof FenceError && e instanceof Error);
      assert.equal(e.code, code);
      assert.equal(e.status, status);
      assert.equal(e.detail, `fence: detail of ${code}`);
      assert.equal(e.problem?.code, code);
      assert.equal(e.name, C.name);
    }
  });

  test("not_leader, unavailable and internal: 503 nothing applied, 503 unknown, 500", () => {
    const nl = problemError(503, body("not_leader", 503));
    assert.ok(nl instanceof NotLeaderError);
    assert.equal(isAmbiguous(nl), false, "not_leader applied nothing");
    const un = problemError(503, body("unavailable", 503));
    assert.ok(un instanceof UnavailableError);
    assert.equal(isAmbiguous(un), true);
    const inr = problemError(500, body("internal", 500));
    assert.ok(inr instanceof InternalError);
    assert.equal(isAmbiguous(inr), true);
    assert.equal(isAmbiguous(problemError(409, body("fenced", 409))), false);
  });

  test("typed members, tokens as exact bigints", () => {
    const f = problemError(409, body("fenced", 409, `,"resource":"orders","presented":9007199254740993,"last_fence":9223372036854775807`));
    assert.ok(f instanceof FencedError);
    assert.equal(f.resource, "orders");
    assert.equal(f.presented, 9007199254740993n);
    assert.equal(f.lastFence, 9223372036854775807n);
    assert.equal(f.message, 'fence: "orders": token 9007199254740993 is stale (last fence 9223372036854775807)');
    assert.ok(isLost(f));

    const n = problemError(409, body("token_not_issued", 409, `,"resource":"r","presented":9223372036854775807,"last_token":7`));
    assert.ok(n instanceof TokenNotIssuedError);
    assert.equal(n.presented, 9223372036854775807n);
    assert.equal(n.lastToken, 7n);

    const l = problemError(409, body("lease_lost", 409, `,"resource":"r","presented":5,"current":0`));
    assert.ok(l instanceof LeaseLostError);
    assert.equal(l.presented, 5n);
    assert.equal(l.current, 0n);
    assert.ok(isLost(l));

    const h = problemError(409, body("lock_held", 409, `,"resource":"r","retry_after_ms":1234`));
    assert.ok(h instanceof LockHeldError);
    assert.equal(h.retryAfterMs, 1234);
    assert.equal(h.resource, "r");
    const h2 = problemError(409, body("lock_held", 409, `,"resource":"r"`), new Headers({ "Retry-After": "3" }));
    assert.ok(h2 instanceof LockHeldError);
    assert.equal(h2.retryAfterMs, 3000, "falls back to the Retry-After header");

    const rl = problemError(429, body("rate_limited", 429, `,"retry_after_ms":250`));
    assert.ok(rl instanceof RateLimitedError);
    assert.equal(rl.retryAfterMs, 250);
  });

  test("an unknown code is a plain FenceError; a body that is not a problem has code \"\"", () => {
    const u = problemError(418, body("teapot", 418));
    assert.equal(u.constructor, FenceError);
    assert.equal(u.code, "teapot");
    const p = problemError(502, "<html>Bad gateway</html>");
    assert.equal(p.constructor, FenceError);
    assert.equal(p.code, "");
    assert.equal(p.status, 502);
    assert.equal(p.detail, "<html>Bad gateway</html>");
    assert.equal(p.problem, undefined);
    assert.equal(problemError(500, `{"code":""}`).code, "");
    assert.equal(problemError(500, `[1]`).code, "");
    assert.equal(problemError(500, ``).code, "");
    // A member named like a prototype property is a code no class has.
    assert.equal(problemError(400, body("constructor", 400)).constructor, FenceError);
    assert.equal(problemError(400, body("__proto__", 400)).constructor, FenceError);
  });

  test("isAmbiguous", () => {
    assert.equal(isAmbiguous(undefined), false);
    assert.equal(isAmbiguous(new TransportError("refused", false, undefined)), false);
    assert.equal(isAmbiguous(new TransportError("reset", true, undefined)), true);
    assert.equal(isAmbiguous(new MaybeAppliedError(problemError(409, body("fenced", 409)), new TransportError("reset", true, undefined))), true);
    assert.equal(isAmbiguous(new TypeError("bad token")), false);
    assert.equal(isAmbiguous(new DOMException("aborted", "AbortError")), true);
  });
});
