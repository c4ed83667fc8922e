// The SSE parser: a corpus, and seeded random streams fed in random chunks,
// checked against a plain transcription of the WHATWG rules.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { SSEError, SSEParser, toWatchEvent, type SSEEvent } from "../src/index.js";
import { packageRoot, rng } from "./helpers.js";

/**
 * The reference: the standard's steps over the whole stream at once. Decode
 * as UTF-8 (one leading BOM dropped, bad bytes as U+FFFD), split into lines
 * at CRLF, LF or CR, drop the unterminated last one, and process each line.
 */
function reference(bytes: Uint8Array, startId = ""): { events: SSEEvent[]; lastEventId: string; retry?: number; comments: string[] } {
  const text = new TextDecoder("utf-8").decode(bytes);
  const lines: string[] = [];
  let cur = "";
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === "\r") {
      lines.push(cur);
      cur = "";
      if (text[i + 1] === "\n") i++;
    } else if (c === "\n") {
      lines.push(cur);
      cur = "";
    } else {
      cur += c;
    }
  }
  const events: SSEEvent[] = [];
  const comments: string[] = [];
  let data = "", type = "", idBuf = startId, lastEventId = startId;
  let retry: number | undefined;
  for (const line of lines) {
    if (line === "") {
      lastEventId = idBuf;
      if (data === "") {
        type = "";
        continue;
      }
      if (data.endsWith("\n")) data = data.slice(0, -1);
      events.push({ type: type || "message", data, lastEventId });
      data = "";
      type = "";
      continue;
    }
    if (line.startsWith(":")) {
      comments.push(line.slice(1));
      continue;
    }
    const i = line.indexOf(":");
    const field = i < 0 ? line : line.slice(0, i);
    let value = i < 0 ? "" : line.slice(i + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") type = value;
    else if (field === "data") data += value + "\n";
    else if (field === "id") {
      if (!value.includes("\u0000")) idBuf = value;
    } else if (field === "retry") {
      if (/^[0-9]+$/.test(value)) retry = Number(value);
    }
  }
  return { events, lastEventId, retry, comments };
}

/** Feeds bytes to a new parser in the given chunks. */
function parse(bytes: Uint8Array, cuts: number[], startId = "") {
  const comments: string[] = [];
  const p = new SSEParser({ lastEventId: startId, onComment: (c) => comments.push(c) });
  const events: SSEEvent[] = [];
  let at = 0;
  for (const c of [...cuts, bytes.length]) {
    events.push(...p.push(bytes.subarray(at, c)));
    at = c;
  }
  events.push(...p.end());
  return { events, lastEventId: p.lastEventId, retry: p.retry, comments };
}

function hex(s: string): Uint8Array {
  return Uint8Array.from(s.match(/../g) ?? [], (h) => parseInt(h, 16));
}

interface Case {
  name: string;
  input?: string;
  input_hex?: string;
  events: SSEEvent[];
  lastEventId?: string;
  retry?: number;
}

describe("SSEParser", () => {
  test("the corpus (test/testdata/sse.json), whole, byte by byte, and at every cut", () => {
    const corpus = JSON.parse(readFileSync(join(packageRoot, "test", "testdata", "sse.json"), "utf8")) as { cases: Case[] };
    assert.ok(corpus.cases.length >= 15);
    for (const c of corpus.cases) {
      const bytes = c.input_hex !== undefined ? hex(c.input_hex) : new TextEncoder().encode(c.input);
      const ways: number[][] = [[], Array.from({ length: Math.max(0, bytes.length - 1) }, (_, i) => i + 1)];
      for (let k = 1; k < bytes.length; k++) ways.push([k]);
      for (const cuts of ways) {
        const got = parse(bytes, cuts);
        assert.deepStrictEqual(got.events, c.events, `${c.name} (cuts ${cuts.length > 3 ? cuts.length + " cuts" : JSON.stringify(cuts)})`);
        if (c.lastEventId !== undefined) assert.equal(got.lastEventId, c.lastEventId, `${c.name}: lastEventId`);
        if (c.retry !== undefined) assert.equal(got.retry, c.retry, `${c.name}: retry`);
      }
      assert.deepStrictEqual(reference(bytes).events, c.events, `${c.name}: the reference agrees`);
    }
  });

  test("the API's example stream", () => {
    const text = "retry: 1000\n\nid: 6c1f0d2e9a4b7c31-17\nevent: granted\ndata: {\"type\":\"granted\",\"resource\":\"orders\",\"holder\":\"worker-a\",\"token\":7,\"last_fence\":7,\"expires_at\":\"2026-12-01T12:00:10Z\",\"time\":\"2026-12-01T12:00:00.000Z\"}\n\n: heartbeat\n";
    const got = parse(new TextEncoder().encode(text), []);
    assert.equal(got.retry, 1000);
    assert.deepEqual(got.comments, [" heartbeat"]);
    assert.equal(got.events.length, 1);
    const ev = toWatchEvent(got.events[0].type, got.events[0].data, got.events[0].lastEventId);
    assert.equal(ev.type, "granted");
    assert.equal(ev.id, "6c1f0d2e9a4b7c31-17");
    assert.equal(ev.token, 7n);
    assert.equal(ev.lastFence, 7n);
    assert.equal(ev.holder, "worker-a");
    assert.equal(ev.expiresAt?.toISOString(), "2026-12-01T12:00:10.000Z");
    assert.equal(ev.time?.toISOString(), "2026-12-01T12:00:00.000Z");
  });

  test("limits throw SSEError", () => {
    const p = new SSEParser({ maxLineLength: 10 });
    assert.throws(() => p.pushText("data: 0123456789\n"), SSEError);
    const q = new SSEParser({ maxLineLength: 10 });
    assert.throws(() => q.pushText("data: 0123456789"), SSEError, "also a line not yet ended");
    const r = new SSEParser({ maxEventSize: 10 });
    assert.throws(() => r.pushText("data: 012345\ndata: 012345\n"), SSEError);
  });

  test("fuzz: seeded random streams in random chunks agree with the reference and never throw", () => {
    const r = rng(0x5ee_d5e);
    const pieces = [
      "data", "data:", "data: x", "data:  two spaces", "data: {\"a\":1}", "id", "id: 1", "id: é-2", "id: a\u0000b", "event: e",
      "event", "retry: 12", "retry: 1x", "retry:", "retry: 007", ": comment", ":", "", "", "", "field: ignored", "data:\u2028",
      "\ufeffdata: bom", " data: leading space", "DATA: case", "data:é😀", "data::colon",
    ];
    const ends = ["\n", "\r", "\r\n", "\n", "\n\n", "\r\r\n"];
    const enc = new TextEncoder();
    let total = 0;
    for (let n = 0; n < 3000; n++) {
      let text = r.int(4) === 0 ? "\ufeff" : "";
      const lines = 1 + r.int(20);
      for (let i = 0; i < lines; i++) text += r.pick(pieces) + r.pick(ends);
      if (r.int(3) === 0) text += r.pick(pieces); // an unterminated tail
      let bytes = enc.encode(text);
      if (r.int(5) === 0) {
        // Bad UTF-8: a stray continuation byte, a truncated sequence, an overlong form.
        const bad = r.pick([[0x80], [0xe2, 0x82], [0xc0, 0xaf], [0xff], [0xef, 0xbb]]);
        const at = r.int(bytes.length + 1);
        bytes = Uint8Array.from([...bytes.subarray(0, at), ...bad, ...bytes.subarray(at)]);
      }
      const cuts: number[] = [];
      for (let at = r.int(4); at < bytes.length; at += 1 + r.int(8)) cuts.push(at);
      const startId = r.int(3) === 0 ? "start" : "";
      const want = reference(bytes, startId);
      let got;
      try {
        got = parse(bytes, cuts, startId);
      } catch (e) {
        assert.fail(`the parser threw ${String(e)} on ${JSON.stringify(new TextDecoder().decode(bytes))}`);
      }
      assert.deepStrictEqual(got.events, want.events, `events of ${JSON.stringify(new TextDecoder().decode(bytes))} cut at ${cuts}`);
      assert.equal(got.lastEventId, want.lastEventId);
      assert.equal(got.retry, want.retry);
      assert.deepStrictEqual(got.comments, want.comments);
      total += got.events.length;
    }
    assert.ok(total > 1000, `only ${total} events dispatched`);
  });

  test("fuzz: random bytes never make it throw", () => {
    const r = rng(42);
    for (let n = 0; n < 2000; n++) {
      const bytes = Uint8Array.from({ length: r.int(200) }, () => r.pick([0x0a, 0x0d, 0x3a, 0x20, 0x64, 0x61, 0x74, 0x69, 0xef, 0xbb, 0xbf, 0x80, 0x00, r.int(256)]));
      const p = new SSEParser();
      for (let at = 0; at < bytes.length; ) {
        const k = 1 + r.int(16);
        p.push(bytes.subarray(at, at + k));
        at += k;
      }
      p.end();
    }
  });
});
