// Sequencers: fencing tokens signed by the lock service (Ed25519), so that a
// resource can check offline, with only the service's public keys, that a
// token was really issued for it. The format, version 1:
//
//   base64url(payload) "." base64url(signature)   (unpadded, at most 2048 bytes)
//
// payload: 0x01, uvarint-length-prefixed kid (1..64 of [A-Za-z0-9_-]), uvarint
// token (1..2^63-1), uvarint expires (Unix ms, 0..2^63-1; 0: none),
// uvarint-length-prefixed resource (1..512 bytes of UTF-8 without control
// characters), uvarint-length-prefixed holder (1..256 bytes, the same), and
// nothing after. The signature is pure Ed25519 over "fence-seq-v1" 0x00
// payload. Every field has exactly one encoding: shortest varints, base64url
// without padding and with zero padding bits, nothing else accepted.

import { InvalidSequencerError } from "./errors.js";
import type { PublicKeyJWK } from "./client.js";
import { MAX_TOKEN, toToken, type TokenLike } from "./token.js";

/** Limits of the sequencer format, in bytes. */
export const MAX_SEQUENCER_LEN = 2048;
export const MAX_KEY_ID_LEN = 64;
const MAX_NAME_LEN = 512;
const MAX_HOLDER_LEN = 256;

/** Why a sequencer was rejected. */
export type SequencerReason = "malformed" | "unknown_key" | "bad_signature" | "wrong_resource" | "wrong_token";

/**
 * The error of parseSequencer and verifySequencer: an InvalidSequencerError
 * (code invalid_sequencer, as a fence guard answers it, status 403) with the
 * reason the check failed.
 */
export class SequencerError extends InvalidSequencerError {
  readonly reason: SequencerReason;
  constructor(reason: SequencerReason, detail: string) {
    super(403, `fence: invalid sequencer: ${reason.replace("_", " ")}: ${detail}`, undefined);
    this.reason = reason;
  }
}

/** The content of a sequencer: the lock service's statement that token was issued to holder for resource. */
export interface Sequencer {
  /** The id of the key that signed it. */
  kid: string;
  token: bigint;
  /** When the lease expired or expires, Unix time in milliseconds; 0n when not stated. */
  expiresMs: bigint;
  /** expiresMs as a Date; undefined when not stated. */
  expiresAt: Date | undefined;
  resource: string;
  holder: string;
  /** The payload bytes, as signed after the context. */
  payload: Uint8Array;
  /** The 64-byte signature. */
  signature: Uint8Array;
}

const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const B64_INDEX = (() => {
  const t = new Int16Array(128).fill(-1);
  for (let i = 0; i < B64.length; i++) t[B64.charCodeAt(i)] = i;
  return t;
})();

/** Decodes strict unpadded base64url; undefined unless s is exactly the encoding of some bytes. */
export function base64urlDecode(s: string): Uint8Array | undefined {
  const n = s.length;
  if (n % 4 === 1) return undefined;
  const out = new Uint8Array(Math.floor((n * 3) / 4));
  let o = 0, acc = 0, bits = 0;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    const v = c < 128 ? B64_INDEX[c] : -1;
    if (v < 0) return undefined;
    acc = (acc << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = (acc >> bits) & 0xff;
    }
  }
  if ((acc & ((1 << bits) - 1)) !== 0) return undefined; // non-zero padding bits
  return out;
}

/** Encodes bytes as unpadded base64url. */
export function base64urlEncode(b: Uint8Array): string {
  let s = "";
  let i = 0;
  for (; i + 2 < b.length; i += 3) {
    const v = (b[i] << 16) | (b[i + 1] << 8) | b[i + 2];
    s += B64[v >> 18] + B64[(v >> 12) & 63] + B64[(v >> 6) & 63] + B64[v & 63];
  }
  if (b.length - i === 1) {
    const v = b[i] << 16;
    s += B64[v >> 18] + B64[(v >> 12) & 63];
  } else if (b.length - i === 2) {
    const v = (b[i] << 16) | (b[i + 1] << 8);
    s += B64[v >> 18] + B64[(v >> 12) & 63] + B64[(v >> 6) & 63];
  }
  return s;
}

const fatalUTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

const isKeyID = (s: string) => s.length >= 1 && s.length <= MAX_KEY_ID_LEN && /^[A-Za-z0-9_-]+$/.test(s);

/** Whether s has a control character (U+0000..U+001F, U+007F..U+009F), as Go's unicode.IsControl. */
// eslint-disable-next-line no-control-regex
const hasControl = (s: string) => /[\u0000-\u001f\u007f-\u009f]/.test(s);

class Reader {
  i = 0;
  constructor(readonly b: Uint8Array) {}
  byte(): number {
    if (this.i >= this.b.length) throw malformed("payload: truncated");
    return this.b[this.i++];
  }
  /** An unsigned LEB128 varint, as Go's binary.Uvarint reads it (at most 10 bytes, within 64 bits). */
  uvarint(): bigint {
    let x = 0n;
    let shift = 0n;
    for (let k = 0; k < 10; k++) {
      if (this.i >= this.b.length) throw malformed("payload: truncated or overflowing varint");
      const c = this.b[this.i++];
      if (c < 0x80) {
        if (k === 9 && c > 1) throw malformed("payload: truncated or overflowing varint");
        return x | (BigInt(c) << shift);
      }
      x |= BigInt(c & 0x7f) << shift;
      shift += 7n;
    }
    throw malformed("payload: truncated or overflowing varint");
  }
  bytes(maxLen: number): Uint8Array {
    const n = this.uvarint();
    if (n > BigInt(maxLen) || n > BigInt(this.b.length - this.i)) {
      throw malformed(`payload: field of ${n} bytes: longer than ${maxLen} or truncated`);
    }
    const v = this.b.subarray(this.i, this.i + Number(n));
    this.i += Number(n);
    return v;
  }
}

function malformed(detail: string): SequencerError {
  return new SequencerError("malformed", detail);
}

function uvarintBytes(v: bigint): number[] {
  const out: number[] = [];
  while (v >= 0x80n) {
    out.push(Number(v & 0x7fn) | 0x80);
    v >>= 7n;
  }
  out.push(Number(v));
  return out;
}

const utf8 = new TextEncoder();

/** Encodes the payload of a sequencer's content (the canonical form). */
function encodePayload(kid: string, token: bigint, expiresMs: bigint, resource: string, holder: string): Uint8Array {
  const r = utf8.encode(resource), h = utf8.encode(holder), k = utf8.encode(kid);
  const parts = [
    [1],
    uvarintBytes(BigInt(k.length)), Array.from(k),
    uvarintBytes(token),
    uvarintBytes(expiresMs),
    uvarintBytes(BigInt(r.length)), Array.from(r),
    uvarintBytes(BigInt(h.length)), Array.from(h),
  ];
  return Uint8Array.from(parts.flat());
}

function text(b: Uint8Array, what: string, maxLen: number): string {
  let s: string;
  try {
    s = fatalUTF8.decode(b);
  } catch {
    throw malformed(`${what} is not valid UTF-8`);
  }
  if (b.length === 0) throw malformed(`${what} is empty`);
  if (b.length > maxLen) throw malformed(`${what} is ${b.length} bytes, more than ${maxLen}`);
  if (hasControl(s)) throw malformed(`${what} ${JSON.stringify(s)} contains a control character`);
  return s;
}

/**
 * Decodes a sequencer WITHOUT verifying its signature, for logs and tools;
 * never trust its result (use verifySequencer). It throws a SequencerError
 * with reason "malformed" unless s is exactly in the format, in its one
 * canonical encoding. It is pure: no I/O, no crypto.
 */
export function parseSequencer(s: string): Sequencer {
  if (typeof s !== "string") throw malformed("not a string");
  // The limit is in bytes; the alphabet check below rejects every non-ASCII character.
  if (s.length > MAX_SEQUENCER_LEN) throw malformed(`${s.length} bytes, more than ${MAX_SEQUENCER_LEN}`);
  const dot = s.indexOf(".");
  if (dot < 0) throw malformed('not base64url(payload) "." base64url(signature)');
  const p64 = s.slice(0, dot), sig64 = s.slice(dot + 1);
  if (!/^[A-Za-z0-9_-]*$/.test(p64) || !/^[A-Za-z0-9_-]*$/.test(sig64)) {
    throw malformed('not base64url(payload) "." base64url(signature)');
  }
  const payload = base64urlDecode(p64);
  if (payload === undefined) throw malformed("payload: illegal base64url data");
  const signature = base64urlDecode(sig64);
  if (signature === undefined || signature.length !== 64) throw malformed("signature is not 64 bytes of base64url");
  const d = new Reader(payload);
  const version = d.byte();
  if (version !== 1) throw malformed(`version ${version}, want 1`);
  const kidBytes = d.bytes(MAX_KEY_ID_LEN);
  const token = d.uvarint();
  const expiresMs = d.uvarint();
  const resourceBytes = d.bytes(MAX_NAME_LEN);
  const holderBytes = d.bytes(MAX_HOLDER_LEN);
  if (d.i !== payload.length) throw malformed(`${payload.length - d.i} bytes after the payload`);
  if (expiresMs > MAX_TOKEN) throw malformed(`expires ${expiresMs} out of range`);
  let kid: string;
  try {
    kid = fatalUTF8.decode(kidBytes);
  } catch {
    throw malformed("key id is not valid UTF-8");
  }
  if (!isKeyID(kid)) throw malformed(`key id ${JSON.stringify(kid)} is not 1..${MAX_KEY_ID_LEN} characters of [A-Za-z0-9_-]`);
  if (token < 1n || token > MAX_TOKEN) throw malformed(`token ${token} out of range 1..${MAX_TOKEN}`);
  const resource = text(resourceBytes, "resource", MAX_NAME_LEN);
  const holder = text(holderBytes, "holder", MAX_HOLDER_LEN);
  // Re-encoding also rejects varints that are not in their shortest form.
  const again = encodePayload(kid, token, expiresMs, resource, holder);
  if (again.length !== payload.length || again.some((x, k) => x !== payload[k])) {
    throw malformed("payload is not in canonical form");
  }
  return {
    kid, token, expiresMs,
    expiresAt: expiresMs === 0n ? undefined : new Date(Number(expiresMs)),
    resource, holder, payload, signature,
  };
}

const CONTEXT = utf8.encode("fence-seq-v1\0");

/** The bytes an Ed25519 signature of a sequencer covers: the context and the payload. */
export function signedMessage(payload: Uint8Array): Uint8Array {
  const m = new Uint8Array(CONTEXT.length + payload.length);
  m.set(CONTEXT, 0);
  m.set(payload, CONTEXT.length);
  return m;
}

function subtle(): SubtleCrypto {
  const s = globalThis.crypto?.subtle;
  if (!s) throw new Error("fence: WebCrypto (globalThis.crypto.subtle) is not available here: cannot verify Ed25519 signatures");
  return s;
}

/** Whether this platform's WebCrypto verifies Ed25519 signatures. */
export async function ed25519Supported(): Promise<boolean> {
  try {
    const s = globalThis.crypto?.subtle;
    if (!s) return false;
    await s.importKey("raw", new Uint8Array(32), { name: "Ed25519" }, false, ["verify"]);
    return true;
  } catch {
    return false;
  }
}

/**
 * The public keys a resource trusts, by key id: the keys of GET /v1/keys.
 * During a key rotation it holds the old and the new key; removing a key
 * revokes every sequencer it signed.
 */
export class KeySet {
  readonly #raw = new Map<string, Uint8Array>();
  readonly #keys = new Map<string, Promise<CryptoKey>>();

  /**
   * Builds a key set from JWKs as GET /v1/keys serves them (also the whole
   * answer, {"keys": [...]}). Each must be kty "OKP", crv "Ed25519", alg
   * absent, "Ed25519" or "EdDSA", a valid kid, a 32-byte x, and no "d".
   */
  static fromJWKs(jwks: readonly PublicKeyJWK[] | { keys: readonly PublicKeyJWK[] }): KeySet {
    const list = Array.isArray(jwks) ? jwks : (jwks as { keys: readonly PublicKeyJWK[] }).keys;
    if (!Array.isArray(list)) throw new TypeError("fence: keys: want an array of JWKs");
    const ks = new KeySet();
    for (const j of list) {
      if (j === null || typeof j !== "object") throw new TypeError("fence: public key: not an object");
      const kid = (j as { kid?: unknown }).kid;
      if (j.kty !== "OKP" || j.crv !== "Ed25519") {
        throw new TypeError(`fence: public key ${JSON.stringify(kid)}: kty ${JSON.stringify(j.kty)} crv ${JSON.stringify(j.crv)}, want OKP Ed25519`);
      }
      if (j.alg !== undefined && j.alg !== "" && j.alg !== "Ed25519" && j.alg !== "EdDSA") {
        throw new TypeError(`fence: public key ${JSON.stringify(kid)}: alg ${JSON.stringify(j.alg)}, want Ed25519`);
      }
      if ((j as { d?: unknown }).d !== undefined) throw new TypeError(`fence: public key ${JSON.stringify(kid)}: contains a private key`);
      if (typeof kid !== "string" || !isKeyID(kid)) throw new TypeError(`fence: public key: kid ${JSON.stringify(kid)} is not 1..64 characters of [A-Za-z0-9_-]`);
      const x = typeof j.x === "string" ? base64urlDecode(j.x) : undefined;
      if (x === undefined || x.length !== 32) throw new TypeError(`fence: public key ${JSON.stringify(kid)}: x is not 32 bytes of unpadded base64url`);
      ks.add(kid, x);
    }
    return ks;
  }

  /** Adds (or replaces) the 32-byte Ed25519 public key of kid. */
  add(kid: string, publicKey: Uint8Array): this {
    if (!isKeyID(kid)) throw new TypeError(`fence: key id ${JSON.stringify(kid)} is not 1..64 characters of [A-Za-z0-9_-]`);
    if (!(publicKey instanceof Uint8Array) || publicKey.length !== 32) throw new TypeError(`fence: public key ${JSON.stringify(kid)} is not 32 bytes`);
    this.#raw.set(kid, publicKey.slice());
    this.#keys.delete(kid);
    return this;
  }

  /** Removes kid's key. */
  delete(kid: string): boolean {
    this.#keys.delete(kid);
    return this.#raw.delete(kid);
  }

  has(kid: string): boolean {
    return this.#raw.has(kid);
  }

  get kids(): string[] {
    return [...this.#raw.keys()];
  }

  /** The WebCrypto key of kid, undefined if the set has none. */
  key(kid: string): Promise<CryptoKey> | undefined {
    const raw = this.#raw.get(kid);
    if (raw === undefined) return undefined;
    let k = this.#keys.get(kid);
    if (k === undefined) {
      k = subtle().importKey("raw", raw as BufferSource, { name: "Ed25519" }, false, ["verify"]);
      k.catch(() => this.#keys.delete(kid));
      this.#keys.set(kid, k);
    }
    return k;
  }

  /**
   * Checks that s is a sequencer signed by a key in the set for exactly
   * resource and token, and returns its content. Otherwise it throws a
   * SequencerError whose reason says which check failed, in this order:
   * malformed, unknown_key, bad_signature, wrong_resource, wrong_token. An
   * expired sequencer is not rejected: staleness is the fence's to decide.
   * Without WebCrypto Ed25519 it throws an Error saying so.
   */
  async verify(s: string, resource: string, token: TokenLike): Promise<Sequencer> {
    const want = toToken(token);
    const seq = parseSequencer(s);
    const key = this.key(seq.kid);
    if (key === undefined) throw new SequencerError("unknown_key", `key id ${JSON.stringify(seq.kid)}`);
    const ok = await subtle().verify({ name: "Ed25519" }, await key, seq.signature as BufferSource, signedMessage(seq.payload) as BufferSource);
    if (!ok) throw new SequencerError("bad_signature", `key id ${JSON.stringify(seq.kid)}`);
    if (seq.resource !== resource) {
      throw new SequencerError("wrong_resource", `signed for ${JSON.stringify(seq.resource)}, presented for ${JSON.stringify(resource)}`);
    }
    if (seq.token !== want) throw new SequencerError("wrong_token", `signed for token ${seq.token}, presented with ${want}`);
    return seq;
  }
}

/**
 * Checks that s is a sequencer signed by one of keys (a KeySet, or JWKs as
 * GET /v1/keys serves them) for exactly resource and token, and returns its
 * content; see KeySet.verify.
 */
export function verifySequencer(
  keys: KeySet | readonly PublicKeyJWK[] | { keys: readonly PublicKeyJWK[] },
  s: string,
  resource: string,
  token: TokenLike,
): Promise<Sequencer> {
  try {
    const ks = keys instanceof KeySet ? keys : KeySet.fromJWKs(keys);
    return ks.verify(s, resource, token);
  } catch (e) {
    return Promise.reject(e);
  }
}
