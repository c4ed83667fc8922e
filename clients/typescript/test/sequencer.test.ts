// Offline sequencer verification: every vector of
// testdata/sequencer/vectors.json, and the sequencers of a real server
// started with a signing key.

import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import {
  Client,
  KeySet,
  SequencerError,
  base64urlDecode,
  base64urlEncode,
  ed25519Supported,
  parseSequencer,
  verifySequencer,
  type PublicKeyJWK,
} from "../src/index.js";
import { fence, name, repoRoot, startServer, tempDir, type Server } from "./helpers.js";

interface Vectors {
  keys: { kid: string; jwk: PublicKeyJWK; public_key_hex: string }[];
  valid: { name: string; sequencer: string; kid: string; token: string; expires_ms: string; resource: string; holder: string; payload_hex: string; signature_hex: string }[];
  invalid: { name: string; sequencer: string; reason: string; stage: "parse" | "verify" }[];
  mismatch: { name: string; sequencer: string; resource: string; token: string }[];
}

const vectorsFile = join(repoRoot, "testdata", "sequencer", "vectors.json");
const vectors: Vectors | undefined = existsSync(vectorsFile) ? JSON.parse(readFileSync(vectorsFile, "utf8")) : undefined;
const noVectors = vectors === undefined ? "testdata/sequencer/vectors.json is not in the repository" : false;
const hex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");

let ed25519 = false;
const NO_ED25519 = "this platform's WebCrypto has no Ed25519: signature checks skipped";

before(async () => {
  ed25519 = await ed25519Supported();
  if (!ed25519) console.log(`# ${NO_ED25519}`);
});

describe("sequencer vectors", { skip: noVectors }, () => {
  const v = vectors!;
  const keySet = () => KeySet.fromJWKs(v.keys.map((k) => k.jwk));

  test("keys: the JWKs and public_key_hex agree; a key set builds from them", () => {
    for (const k of v.keys) {
      assert.equal(k.jwk.kid, k.kid);
      assert.equal(hex(base64urlDecode(k.jwk.x)!), k.public_key_hex);
    }
    assert.deepEqual(keySet().kids.sort(), v.keys.map((k) => k.kid).sort());
    assert.deepEqual(KeySet.fromJWKs({ keys: v.keys.map((k) => k.jwk) }).kids.length, v.keys.length);
  });

  test("valid: parse gives every field exactly", () => {
    assert.ok(v.valid.length > 0);
    for (const c of v.valid) {
      const s = parseSequencer(c.sequencer);
      assert.equal(s.kid, c.kid, c.name);
      assert.equal(s.token, BigInt(c.token), c.name);
      assert.equal(typeof s.token, "bigint");
      assert.equal(s.expiresMs, BigInt(c.expires_ms), c.name);
      assert.equal(s.expiresAt === undefined, c.expires_ms === "0", c.name);
      assert.equal(s.resource, c.resource, c.name);
      assert.equal(s.holder, c.holder, c.name);
      assert.equal(hex(s.payload), c.payload_hex, c.name);
      assert.equal(hex(s.signature), c.signature_hex, c.name);
      const [p, sig] = c.sequencer.split(".");
      assert.equal(base64urlEncode(s.payload), p);
      assert.equal(base64urlEncode(s.signature), sig);
    }
  });

  test("valid: verify with the key set, presenting resource and token", async (t) => {
    if (!ed25519) return t.skip(NO_ED25519);
    const ks = keySet();
    for (const c of v.valid) {
      const s = await ks.verify(c.sequencer, c.resource, BigInt(c.token));
      assert.equal(s.token, BigInt(c.token), c.name);
      if (BigInt(c.token) <= BigInt(Number.MAX_SAFE_INTEGER)) {
        await verifySequencer(v.keys.map((k) => k.jwk), c.sequencer, c.resource, Number(c.token));
      }
    }
  });

  test("invalid, stage parse: parse and verify both fail as malformed", async () => {
    const ks = keySet();
    const parse = v.invalid.filter((c) => c.stage === "parse");
    assert.ok(parse.length > 0);
    for (const c of parse) {
      assert.throws(() => parseSequencer(c.sequencer), (e: unknown) => e instanceof SequencerError && e.reason === "malformed" && e.code === "invalid_sequencer",
        `${c.name}: ${c.reason}`);
      for (const [res, tok] of [["orders", 5n], ["", 1n]] as const) {
        await assert.rejects(ks.verify(c.sequencer, res, tok), (e: unknown) => e instanceof SequencerError && e.reason === "malformed", c.name);
      }
    }
  });

  test("invalid, stage verify: parse succeeds, verify fails with the parsed resource and token", async (t) => {
    if (!ed25519) return t.skip(NO_ED25519);
    const ks = keySet();
    const ver = v.invalid.filter((c) => c.stage === "verify");
    assert.ok(ver.length > 0);
    for (const c of ver) {
      const s = parseSequencer(c.sequencer);
      await assert.rejects(ks.verify(c.sequencer, s.resource, s.token),
        (e: unknown) => e instanceof SequencerError && (e.reason === "unknown_key" || e.reason === "bad_signature"), `${c.name}: ${c.reason}`);
    }
  });

  test("mismatch: verifies as parsed, fails as presented", async (t) => {
    if (!ed25519) return t.skip(NO_ED25519);
    const ks = keySet();
    assert.ok(v.mismatch.length > 0);
    for (const c of v.mismatch) {
      const s = parseSequencer(c.sequencer);
      await ks.verify(c.sequencer, s.resource, s.token);
      await assert.rejects(ks.verify(c.sequencer, c.resource, BigInt(c.token)),
        (e: unknown) => e instanceof SequencerError && (e.reason === "wrong_resource" || e.reason === "wrong_token"), c.name);
    }
  });

  test("bad JWKs are refused", () => {
    const good = v.keys[0].jwk;
    for (const bad of [
      { ...good, kty: "EC" },
      { ...good, crv: "Ed448" },
      { ...good, alg: "ES256" },
      { ...good, kid: "" },
      { ...good, kid: "a.b" },
      { ...good, x: good.x + "A" },
      { ...good, x: good.x.slice(0, -1) + "p" }, // non-zero padding bits
      { ...good, d: good.x },
    ]) {
      assert.throws(() => KeySet.fromJWKs([bad as PublicKeyJWK]), TypeError, JSON.stringify(bad));
    }
    assert.equal(KeySet.fromJWKs([{ ...good, alg: undefined }, { ...good, kid: "k2", alg: "EdDSA" }]).kids.length, 2);
  });
});

describe("sequencers of a real server", () => {
  let srv: Server;
  before(async () => {
    const key = join(tempDir("fence-key-"), "signing.key");
    fence("keygen", "--out", key);
    srv = await startServer({ args: ["--signing-key", key] });
  });
  after(async () => {
    await srv?.stop();
  });

  test("a lease's sequencer verifies with GET /v1/keys and is sent with its writes", async (t) => {
    const c = new Client(srv.url);
    const keys = await c.keys();
    assert.equal(keys.length, 1);
    const res = name("signed");
    const lease = await c.acquire(res, { ttlMs: 5000, holder: "signer" });
    try {
      assert.ok(lease.sequencer, "no sequencer");
      const s = parseSequencer(lease.sequencer!);
      assert.equal(s.resource, res);
      assert.equal(s.holder, "signer");
      assert.equal(s.token, lease.token);
      assert.equal(s.kid, keys[0].kid);
      if (ed25519) {
        await verifySequencer(keys, lease.sequencer!, res, lease.token);
        await assert.rejects(verifySequencer(keys, lease.sequencer!, res + "x", lease.token), (e: unknown) => e instanceof SequencerError && e.reason === "wrong_resource");
      } else {
        t.diagnostic(NO_ED25519);
      }
      // The lease's writes carry it (the server accepts the header), and so
      // do the requests of its stamping fetch.
      await lease.put("k", "v");
      await lease.claim();
      const seen: IncomingHttpHeaders[] = [];
      const echo = createServer((req, r) => {
        seen.push(req.headers);
        req.resume();
        req.on("end", () => r.end());
      });
      await new Promise<void>((r) => echo.listen(0, "127.0.0.1", r));
      try {
        await lease.fetch(`http://127.0.0.1:${(echo.address() as AddressInfo).port}/x`, { method: "DELETE" });
      } finally {
        echo.close();
      }
      assert.equal(seen[0]["fence-sequencer"], lease.sequencer);
      assert.equal(seen[0]["fencing-token"], lease.token.toString());
    } finally {
      await lease.release();
    }
  });
});
