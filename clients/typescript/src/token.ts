// Fencing tokens and revisions: integers in 1..2^63-1, as bigint.

/** The largest valid fencing token and revision, 2^63-1. */
export const MAX_TOKEN: bigint = 9223372036854775807n;

/** A token or revision as the client takes it: a bigint, or a number that is a safe integer. */
export type TokenLike = bigint | number;

/**
 * Returns t as a bigint after checking that it is a fencing token: an integer
 * in 1..2^63-1. A number must be a safe integer (Number.isSafeInteger): past
 * 2^53-1 a number is not exact, so pass a bigint. Throws a TypeError for
 * anything that is not an integer, a RangeError for one out of range.
 */
export function toToken(t: TokenLike, what = "token"): bigint {
  return toInt(t, what, 1n);
}

/** Like toToken, but 0 is allowed too (a txn compare's "key absent"). */
export function toRevisionOrZero(t: TokenLike, what = "revision"): bigint {
  return toInt(t, what, 0n);
}

function toInt(t: TokenLike, what: string, min: bigint): bigint {
  let v: bigint;
  if (typeof t === "bigint") {
    v = t;
  } else if (typeof t === "number") {
    if (!Number.isInteger(t)) throw new TypeError(`fence: ${what} ${t} is not an integer`);
    if (!Number.isSafeInteger(t)) {
      throw new RangeError(`fence: ${what} ${t} is not a safe integer: pass a bigint for values past 2^53-1`);
    }
    v = BigInt(t);
  } else {
    throw new TypeError(`fence: ${what} must be a bigint or a number, not ${t === null ? "null" : typeof t}`);
  }
  if (v < min || v > MAX_TOKEN) throw new RangeError(`fence: ${what} ${v} is out of range ${min}..${MAX_TOKEN}`);
  return v;
}

/**
 * Parses the decimal form of a token as the Fencing-Token header carries it:
 * digits only, no sign, space or leading zero, 1..2^63-1. Returns undefined
 * for anything else.
 */
export function parseToken(s: string | null | undefined): bigint | undefined {
  if (s == null || !/^[1-9][0-9]{0,18}$/.test(s)) return undefined;
  const v = BigInt(s);
  return v <= MAX_TOKEN ? v : undefined;
}
