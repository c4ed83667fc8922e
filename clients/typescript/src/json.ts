// Lossless JSON for fence's API: fencing tokens and revisions go up to
// 2^63-1, past the 2^53 that a JavaScript number holds exactly. JSON.parse
// rounds them before any reviver sees them (Node 20 has no reviver
// context.source), so this module has its own small parser: it reads the
// integers of chosen members as bigint, and everything else exactly as
// JSON.parse does.

/** The error {@link parseJSON} throws for text that is not JSON. */
export class JSONParseError extends SyntaxError {
  /** The offset in the text, in UTF-16 code units, where the fault was found. */
  readonly position: number;
  constructor(message: string, position: number) {
    super(`${message} at position ${position}`);
    this.name = "JSONParseError";
    this.position = position;
  }
}

/** Options of {@link parseJSON}. */
export interface ParseJSONOptions {
  /**
   * Names of object members whose integer values are returned as bigint, at
   * any depth. An integer literal is one without fraction or exponent; a
   * member of one of these names holding anything else (1.5, "7", null) is
   * returned as JSON.parse would.
   */
  bigints?: ReadonlySet<string> | readonly string[];
}

/** A JSON value as {@link parseJSON} returns it. */
export type JSONValue =
  | null
  | boolean
  | number
  | bigint
  | string
  | JSONValue[]
  | { [key: string]: JSONValue };

const enum Ctx {
  Array,
  Object,
}

interface Frame {
  kind: Ctx;
  arr?: JSONValue[];
  obj?: Record<string, JSONValue>;
  key?: string; // the member being read, in an object
}

/**
 * Parses text as JSON (RFC 8259, as JSON.parse accepts it) and returns the
 * integers of the members named in options.bigints as bigint. Without such
 * members its result equals JSON.parse's; it throws {@link JSONParseError}
 * exactly where JSON.parse throws a SyntaxError, and nothing else. It does not
 * recurse, so no nesting depth makes it overflow the stack.
 */
export function parseJSON(text: string, options: ParseJSONOptions = {}): JSONValue {
  const big: ReadonlySet<string> =
    options.bigints === undefined
      ? new Set()
      : options.bigints instanceof Set
        ? options.bigints
        : new Set(options.bigints as readonly string[]);
  if (typeof text !== "string") text = String(text);
  const n = text.length;
  let i = 0;
  const stack: Frame[] = [];

  const fail = (msg: string, at = i): never => {
    throw new JSONParseError(msg, at);
  };
  const ws = () => {
    for (; i < n; i++) {
      const c = text.charCodeAt(i);
      if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) break;
    }
  };
  const readString = (): string => {
    // text[i] is the opening quote.
    i++;
    let out = "";
    let start = i;
    for (;;) {
      if (i >= n) fail("unterminated string");
      const c = text.charCodeAt(i);
      if (c === 0x22) {
        out += text.slice(start, i);
        i++;
        return out;
      }
      if (c < 0x20) fail("control character in string");
      if (c !== 0x5c) {
        i++;
        continue;
      }
      out += text.slice(start, i);
      i++;
      if (i >= n) fail("unterminated string");
      const e = text[i];
      switch (e) {
        case '"':
          out += '"';
          break;
        case "\\":
          out += "\\";
          break;
        case "/":
          out += "/";
          break;
        case "b":
          out += "\b";
          break;
        case "f":
          out += "\f";
          break;
        case "n":
          out += "\n";
          break;
        case "r":
          out += "\r";
          break;
        case "t":
          out += "\t";
          break;
        case "u": {
          let v = 0;
          for (let k = 1; k <= 4; k++) {
            const h = text.charCodeAt(i + k);
            let d: number;
            if (h >= 0x30 && h <= 0x39) d = h - 0x30;
            else if (h >= 0x41 && h <= 0x46) d = h - 0x37;
            else if (h >= 0x61 && h <= 0x66) d = h - 0x57;
            else return fail("bad \\u escape", i + k);
            v = v * 16 + d;
          }
          out += String.fromCharCode(v);
          i += 4;
          break;
        }
        default:
          fail("bad escape");
      }
      i++;
      start = i;
    }
  };
  const isDigit = (c: number) => c >= 0x30 && c <= 0x39;
  const readNumber = (asBig: boolean): number | bigint => {
    const start = i;
    let integer = true;
    if (text.charCodeAt(i) === 0x2d) i++;
    const c0 = text.charCodeAt(i);
    if (c0 === 0x30) {
      i++;
    } else if (c0 >= 0x31 && c0 <= 0x39) {
      while (isDigit(text.charCodeAt(i))) i++;
    } else {
      fail("bad number");
    }
    if (text.charCodeAt(i) === 0x2e) {
      integer = false;
      i++;
      if (!isDigit(text.charCodeAt(i))) fail("bad number");
      while (isDigit(text.charCodeAt(i))) i++;
    }
    const e = text.charCodeAt(i);
    if (e === 0x65 || e === 0x45) {
      integer = false;
      i++;
      const s = text.charCodeAt(i);
      if (s === 0x2b || s === 0x2d) i++;
      if (!isDigit(text.charCodeAt(i))) fail("bad number");
      while (isDigit(text.charCodeAt(i))) i++;
    }
    const lit = text.slice(start, i);
    return asBig && integer ? BigInt(lit) : Number(lit);
  };
  const literal = (word: string, v: JSONValue): JSONValue => {
    if (text.startsWith(word, i)) {
      i += word.length;
      return v;
    }
    return fail("unexpected token");
  };
  const setMember = (obj: Record<string, JSONValue>, key: string, v: JSONValue) => {
    // defineProperty, not obj[key] = v: a member named "__proto__" is an own
    // property in JSON.parse's result, not the object's prototype.
    Object.defineProperty(obj, key, { value: v, writable: true, enumerable: true, configurable: true });
  };

  // The main loop: read a value, then attach it to the innermost container,
  // then read what follows it there.
  let value: JSONValue;
  ws();
  for (;;) {
    // Read one value at i (whitespace skipped), or open a container.
    if (i >= n) fail("unexpected end of JSON input");
    const c = text.charCodeAt(i);
    const top = stack.length > 0 ? stack[stack.length - 1] : undefined;
    const asBig = top !== undefined && top.kind === Ctx.Object && big.has(top.key as string);
    if (c === 0x7b) {
      i++;
      ws();
      const obj: Record<string, JSONValue> = {};
      if (text.charCodeAt(i) === 0x7d) {
        i++;
        value = obj;
      } else {
        if (text.charCodeAt(i) !== 0x22) fail("expected a member name");
        const key = readString();
        ws();
        if (text.charCodeAt(i) !== 0x3a) fail("expected ':'");
        i++;
        ws();
        stack.push({ kind: Ctx.Object, obj, key });
        continue;
      }
    } else if (c === 0x5b) {
      i++;
      ws();
      const arr: JSONValue[] = [];
      if (text.charCodeAt(i) === 0x5d) {
        i++;
        value = arr;
      } else {
        stack.push({ kind: Ctx.Array, arr });
        continue;
      }
    } else if (c === 0x22) {
      value = readString();
    } else if (c === 0x2d || isDigit(c)) {
      value = readNumber(asBig);
    } else if (c === 0x74) {
      value = literal("true", true);
    } else if (c === 0x66) {
      value = literal("false", false);
    } else if (c === 0x6e) {
      value = literal("null", null);
    } else {
      fail("unexpected token");
    }
    // Attach value; close containers as long as they end here.
    for (;;) {
      ws();
      const f = stack.length > 0 ? stack[stack.length - 1] : undefined;
      if (f === undefined) {
        if (i < n) fail("unexpected data after the JSON value");
        return value!;
      }
      if (f.kind === Ctx.Array) {
        f.arr!.push(value!);
        const d = text.charCodeAt(i);
        if (d === 0x2c) {
          i++;
          ws();
          break; // read the next element
        }
        if (d === 0x5d) {
          i++;
          stack.pop();
          value = f.arr!;
          continue;
        }
        if (i >= n) fail("unexpected end of JSON input");
        fail("expected ',' or ']'");
      } else {
        setMember(f.obj!, f.key!, value!);
        const d = text.charCodeAt(i);
        if (d === 0x2c) {
          i++;
          ws();
          if (text.charCodeAt(i) !== 0x22) {
            if (i >= n) fail("unexpected end of JSON input");
            fail("expected a member name");
          }
          f.key = readString();
          ws();
          if (text.charCodeAt(i) !== 0x3a) {
            if (i >= n) fail("unexpected end of JSON input");
            fail("expected ':'");
          }
          i++;
          ws();
          break; // read the member's value
        }
        if (d === 0x7d) {
          i++;
          stack.pop();
          value = f.obj!;
          continue;
        }
        if (i >= n) fail("unexpected end of JSON input");
        fail("expected ',' or '}'");
      }
    }
  }
}

/**
 * Returns the JSON text of value as JSON.stringify would, except that a
 * bigint is written as a JSON integer (JSON.stringify throws on one).
 * Members whose value is undefined or a function are left out, as by
 * JSON.stringify; toJSON methods are honoured. Cycles throw a TypeError.
 */
export function stringifyJSON(value: unknown): string {
  const seen = new Set<object>();
  const enc = (v: unknown, key: string): string | undefined => {
    if (v !== null && typeof v === "object" && typeof (v as { toJSON?: unknown }).toJSON === "function") {
      v = (v as { toJSON: (k: string) => unknown }).toJSON(key);
    }
    switch (typeof v) {
      case "bigint":
        return v.toString();
      case "string":
      case "number":
      case "boolean":
        return JSON.stringify(v);
      case "undefined":
      case "function":
      case "symbol":
        return undefined;
    }
    if (v === null) return "null";
    const o = v as object;
    if (seen.has(o)) throw new TypeError("stringifyJSON: cyclic value");
    seen.add(o);
    let out: string;
    if (Array.isArray(o)) {
      out = "[" + o.map((e, idx) => enc(e, String(idx)) ?? "null").join(",") + "]";
    } else {
      const parts: string[] = [];
      for (const k of Object.keys(o)) {
        const s = enc((o as Record<string, unknown>)[k], k);
        if (s !== undefined) parts.push(JSON.stringify(k) + ":" + s);
      }
      out = "{" + parts.join(",") + "}";
    }
    seen.delete(o);
    return out;
  };
  const s = enc(value, "");
  if (s === undefined) throw new TypeError("stringifyJSON: value has no JSON form");
  return s;
}
