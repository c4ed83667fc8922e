// The lossless JSON parser: a corpus, and seeded random inputs on which it
// must agree with JSON.parse and throw nothing but JSONParseError.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { JSONParseError, parseJSON, stringifyJSON, type JSONValue } from "../src/index.js";
import { packageRoot, rng } from "./helpers.js";

/** Runs parseJSON and JSON.parse on text; checks that they agree; returns parseJSON's result. */
function agree(text: string, bigints?: string[]): { ok: boolean; value?: JSONValue } {
  let ref: { ok: boolean; value?: unknown };
  try {
    ref = { ok: true, value: JSON.parse(text) };
  } catch (e) {
    assert.ok(e instanceof SyntaxError);
    ref = { ok: false };
  }
  let mine: { ok: boolean; value?: JSONValue };
  try {
    mine = { ok: true, value: parseJSON(text, { bigints }) };
  } catch (e) {
    if (!(e instanceof JSONParseError)) throw new Error(`parseJSON threw ${String(e)} (not a JSONParseError) on ${JSON.stringify(text)}`);
    assert.ok(e instanceof SyntaxError);
    mine = { ok: false };
  }
  assert.equal(mine.ok, ref.ok, `parseJSON ${mine.ok ? "accepted" : "rejected"} what JSON.parse ${ref.ok ? "accepts" : "rejects"}: ${JSON.stringify(text)}`);
  if (mine.ok) {
    const diff = difference(mine.value!, ref.value);
    assert.equal(diff, undefined, `different values for ${JSON.stringify(text).slice(0, 300)}: ${diff}`);
  }
  return mine;
}

/**
 * Compares parseJSON's value with JSON.parse's, iteratively (no depth
 * limit): a bigint stands where JSON.parse has its (rounded) number, and 0n
 * for -0; object members in the same order, own, on plain objects. Returns
 * undefined if they agree, else where they differ.
 */
function difference(mine: JSONValue, ref: unknown): string | undefined {
  const stack: [JSONValue, unknown, string][] = [[mine, ref, "$"]];
  while (stack.length > 0) {
    const [a, b, at] = stack.pop()!;
    if (typeof a === "bigint") {
      if (typeof b !== "number" || !(Number(a) === b)) return `${at}: ${a}n vs ${String(b)}`;
      continue;
    }
    if (Array.isArray(a)) {
      if (!Array.isArray(b) || a.length !== b.length) return `${at}: array vs ${typeof b}`;
      a.forEach((x, i) => stack.push([x, b[i], `${at}[${i}]`]));
      continue;
    }
    if (a !== null && typeof a === "object") {
      if (b === null || typeof b !== "object" || Array.isArray(b)) return `${at}: object vs ${typeof b}`;
      if (Object.getPrototypeOf(a) !== Object.prototype || Object.getPrototypeOf(b) !== Object.prototype) return `${at}: prototype`;
      const ka = Object.keys(a), kb = Object.keys(b);
      if (ka.join("\u0000") !== kb.join("\u0000")) return `${at}: keys ${JSON.stringify(ka)} vs ${JSON.stringify(kb)}`;
      for (const k of ka) stack.push([a[k], (b as Record<string, unknown>)[k], `${at}.${k}`]);
      continue;
    }
    if (!Object.is(a, b)) return `${at}: ${String(a)} vs ${String(b)}`;
  }
  return undefined;
}

/** Revives {"$bigint": "123"} as 123n: how the corpus writes expected bigints. */
function revive(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(revive);
  if (v !== null && typeof v === "object") {
    const o = v as Record<string, unknown>;
    if (Object.keys(o).length === 1 && typeof o.$bigint === "string") return BigInt(o.$bigint);
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(o)) Object.defineProperty(out, k, { value: revive(o[k]), enumerable: true, writable: true, configurable: true });
    return out;
  }
  return v;
}

interface Case {
  name: string;
  text: string;
  bigints?: string[];
  valid: boolean;
  expect?: unknown;
}

describe("parseJSON", () => {
  test("the corpus (test/testdata/json.json)", () => {
    const corpus = JSON.parse(readFileSync(join(packageRoot, "test", "testdata", "json.json"), "utf8")) as { cases: Case[] };
    assert.ok(corpus.cases.length >= 20);
    for (const c of corpus.cases) {
      const r = agree(c.text, c.bigints);
      assert.equal(r.ok, c.valid, `${c.name}: valid`);
      if (c.expect !== undefined) assert.deepStrictEqual(r.value, revive(c.expect), c.name);
    }
  });

  test("integers of the named members are exact bigints; others are what JSON.parse gives", () => {
    const v = parseJSON(`{"token":9223372036854775807,"a":[{"token":-0,"x":9223372036854775807}],"token2":1,"last_fence":1.5,"revision":"7"}`, {
      bigints: new Set(["token", "last_fence", "revision"]),
    });
    assert.deepStrictEqual(v, {
      token: 9223372036854775807n,
      a: [{ token: 0n, x: 9223372036854776000 }],
      token2: 1,
      last_fence: 1.5,
      revision: "7",
    });
    assert.deepStrictEqual(parseJSON(`[9223372036854775807]`, { bigints: ["token"] }), [9223372036854776000]);
    assert.deepStrictEqual(parseJSON(`{"token":123456789012345678901234567890}`, { bigints: ["token"] }), { token: 123456789012345678901234567890n });
  });

  test("__proto__ is an own member, as with JSON.parse", () => {
    const v = parseJSON(`{"__proto__":{"token":1},"token":2}`, { bigints: ["token"] }) as Record<string, JSONValue>;
    assert.equal(Object.getPrototypeOf(v), Object.prototype);
    assert.deepStrictEqual(Object.keys(v), ["__proto__", "token"]);
    assert.deepStrictEqual(v["__proto__"], { token: 1n });
  });

  test("deep nesting does not overflow the stack", () => {
    const depth = 200_000;
    agree("[".repeat(depth) + "]".repeat(depth));
    agree(`{"a":`.repeat(depth) + "1" + "}".repeat(depth));
    agree("[".repeat(depth)); // unterminated: both reject
  });

  test("stringifyJSON writes bigints as integers and otherwise as JSON.stringify", () => {
    const v = { a: 1n, b: [2n, "x", null, undefined, () => 1], c: { d: 9223372036854775807n }, e: undefined, f: new Date(0), g: "\u2028\ud800" };
    assert.equal(stringifyJSON(v), `{"a":1,"b":[2,"x",null,null,null],"c":{"d":9223372036854775807},"f":"1970-01-01T00:00:00.000Z","g":"\\u2028\\ud800"}`.replace("\\u2028", "\u2028"));
    const plain = { x: [1, 2.5, -0, "s", true, null, { y: {} }] };
    assert.equal(stringifyJSON(plain), JSON.stringify(plain));
    assert.deepStrictEqual(parseJSON(stringifyJSON({ token: 2n ** 63n - 1n }), { bigints: ["token"] }), { token: 2n ** 63n - 1n });
    const cyc: Record<string, unknown> = {};
    cyc.self = cyc;
    assert.throws(() => stringifyJSON(cyc), TypeError);
  });

  test("fuzz: seeded random values and mutations agree with JSON.parse", () => {
    const r = rng(0x5eed_1);
    const keys = ["token", "last_fence", "a", "b", "__proto__", "", "é", "token"];
    const genString = (): string => {
      const parts = ["a", "é", "\u2028", "\ud83d\ude00", "\ud800", "\\", '"', "\n", "\u0000", "x y", "\u007f"];
      let s = "";
      for (let i = r.int(5); i > 0; i--) s += r.pick(parts);
      return s;
    };
    const genNumber = (): number | string => {
      switch (r.int(8)) {
        case 0:
          return r.int(100);
        case 1:
          return -r.int(1e6);
        case 2:
          return (r.next() - 0.5) * 1e6;
        case 3:
          return "9223372036854775807";
        case 4:
          return "-9007199254740993";
        case 5:
          return "1e308";
        case 6:
          return "-0";
        default:
          return `${r.int(1000)}.${r.int(1000)}e${r.pick(["", "+", "-"])}${r.int(30)}`;
      }
    };
    const gen = (depth: number): string => {
      const ws = () => r.pick(["", "", " ", "\n", "\t", "\r\n  "]);
      const k = depth > 4 ? r.int(4) : r.int(7);
      switch (k) {
        case 0:
          return String(genNumber());
        case 1:
          return JSON.stringify(genString());
        case 2:
          return r.pick(["true", "false", "null"]);
        case 3:
          return String(genNumber());
        case 4: {
          const n = r.int(4);
          return "[" + Array.from({ length: n }, () => ws() + gen(depth + 1) + ws()).join(",") + "]";
        }
        default: {
          const n = r.int(4);
          return "{" + Array.from({ length: n }, () => ws() + JSON.stringify(r.pick(keys)) + ws() + ":" + ws() + gen(depth + 1) + ws()).join(",") + "}";
        }
      }
    };
    const alphabet = ['"', "\\", "{", "}", "[", "]", ",", ":", "-", "+", ".", "e", "E", "0", "1", "9", " ", "\n", "t", "n", "u", "\u0000", "\u00e9", "\ud800", "x", "/", "b", "f"];
    const mutate = (s: string): string => {
      const a = [...s];
      for (let m = 1 + r.int(3); m > 0; m--) {
        const i = r.int(a.length + 1);
        switch (r.int(3)) {
          case 0:
            a.splice(i, 1);
            break;
          case 1:
            a.splice(i, 0, r.pick(alphabet));
            break;
          default:
            a[i] = r.pick(alphabet);
        }
      }
      return a.join("");
    };
    let valid = 0, invalid = 0;
    for (let n = 0; n < 20_000; n++) {
      const text = gen(0);
      const bigints = r.int(2) === 0 ? undefined : ["token", "last_fence", "a"];
      const res = agree(text, bigints);
      assert.ok(res.ok, `generated JSON rejected: ${JSON.stringify(text)}`);
      valid++;
      const m = mutate(text);
      if (!agree(m, bigints).ok) invalid++;
      // Random text from the alphabet alone.
      const junk = Array.from({ length: r.int(12) }, () => r.pick(alphabet)).join("");
      agree(junk, bigints);
    }
    assert.ok(valid > 0 && invalid > 1000, `valid ${valid} invalid ${invalid}`);
  });
});
