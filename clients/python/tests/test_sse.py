"""The SSE parser: a corpus of tricky streams, and a seeded, reproducible
fuzzer that checks it against a plain reference implementation of the
WHATWG rules, whatever the chunking, and that it never raises anything but
its documented error (fence.SSEError)."""

from __future__ import annotations

import json
import os
import random
import re
import unittest
from pathlib import Path
from typing import List, Optional, Tuple

import fence
from fence import SSEError, SSEParser

CORPUS = Path(__file__).resolve().parent / "testdata" / "sse"
SEED = int(os.environ.get("FENCE_FUZZ_SEED", "20261201"))
ITERATIONS = int(os.environ.get("FENCE_FUZZ_ITERATIONS", "5000"))

Result = Tuple[List[Tuple[str, str, str]], str, Optional[int]]


def reference(data: bytes) -> Result:
    """The WHATWG "interpret an event stream" algorithm, written plainly for
    a whole stream at once."""
    text = data.decode("utf-8", "replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = re.split(r"\r\n|\r|\n", text)[:-1]  # the part after the last line end is no line
    events = []
    last_id, id_buf, type_buf, data_buf, retry = "", "", "", "", None
    for line in lines:
        if line == "":
            last_id = id_buf
            if data_buf == "":
                type_buf = ""
                continue
            if data_buf.endswith("\n"):
                data_buf = data_buf[:-1]
            events.append((type_buf or "message", data_buf, last_id))
            type_buf, data_buf = "", ""
            continue
        if line.startswith(":"):
            continue
        if ":" in line:
            field, value = line.split(":", 1)
            if value.startswith(" "):
                value = value[1:]
        else:
            field, value = line, ""
        if field == "event":
            type_buf = value
        elif field == "data":
            data_buf += value + "\n"
        elif field == "id":
            if "\x00" not in value:
                id_buf = value
        elif field == "retry":
            if value and all(c in "0123456789" for c in value):
                retry = min(int(value), 86400000) if len(value) < 100 else 86400000
    return events, last_id, retry


def parse(chunks: List[bytes], max_line: int = 1 << 20) -> Result:
    p = SSEParser(max_line=max_line)
    out = []
    for ch in chunks:
        out += [(e.type, e.data, e.id) for e in p.feed(ch)]
    out += [(e.type, e.data, e.id) for e in p.close()]
    return out, p.last_event_id, p.retry


def random_chunks(rng: random.Random, data: bytes) -> List[bytes]:
    chunks, i = [], 0
    while i < len(data):
        n = rng.choice([1, 1, 2, 3, 5, 8, 64])
        chunks.append(data[i : i + n])
        i += n
        if rng.random() < 0.1:
            chunks.append(b"")
    return chunks


PIECES = [
    b"data", b"data:", b"data: ", b"id", b"id:", b"id: ", b"event", b"event:", b"event: ", b"retry:", b"retry: ",
    b":", b": heartbeat", b" ", b"  ", b"\r", b"\n", b"\r\n", b"\n\n", b"\r\r", b"\x00", "\ufeff".encode(),
    b"\xef", b"\xbb", b"\xbf", b"\xff", b"\xc3", b"\xa9", b"\xe2\x82", b"\xf0\x9f\x98", b"0", b"12", b"999999999999999999999",
    b"x", b"{}", b'{"type":"granted","token":9223372036854775807}', b"\t", "é".encode(), "日本".encode(), b"DATA", b"-1",
]


def random_stream(rng: random.Random) -> bytes:
    mode = rng.random()
    if mode < 0.2:
        return bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 200)))
    parts = [rng.choice(PIECES) for _ in range(rng.randrange(0, 60))]
    if mode < 0.3:
        parts.insert(0, "\ufeff".encode())
    return b"".join(parts)


class CorpusTest(unittest.TestCase):
    def cases(self):  # type: ignore[no-untyped-def]
        names = sorted(p.stem for p in CORPUS.glob("*.sse"))
        self.assertGreater(len(names), 20)
        for name in names:
            raw = (CORPUS / (name + ".sse")).read_bytes()
            want = json.loads((CORPUS / (name + ".json")).read_text(encoding="utf-8"))
            yield name, raw, ([(e["type"], e["data"], e["id"]) for e in want["events"]], want["last_event_id"], want["retry"])

    def test_corpus(self) -> None:
        rng = random.Random(SEED)
        for name, raw, want in self.cases():
            with self.subTest(name):
                self.assertEqual(parse([raw]), want, "whole")
                self.assertEqual(parse([raw[i : i + 1] for i in range(len(raw))]), want, "byte by byte")
                for _ in range(20):
                    self.assertEqual(parse(random_chunks(rng, raw)), want, "random chunks")
                self.assertEqual(reference(raw), want, "reference")

    def test_watch_events_of_the_corpus(self) -> None:
        raw = (CORPUS / "fence-watch.sse").read_bytes()
        p = SSEParser()
        evs = [fence.decode_event(e) for e in p.feed(raw)]
        self.assertEqual([e.type for e in evs], ["granted", "lost"])
        g = evs[0]
        self.assertEqual((g.resource, g.holder, g.token, g.last_fence, g.id), ("orders", "worker-a", fence.MAX_TOKEN, 7, "6c1f0d2e9a4b7c31-17"))
        self.assertEqual(g.expires_at.isoformat(), "2026-12-01T12:00:10+00:00")
        self.assertEqual(evs[1].detail, "list again")

    def test_limits(self) -> None:
        p = SSEParser(max_line=10)
        p.feed(b"data: 1234\n")
        with self.assertRaises(SSEError):
            p.feed(b"data: 12345678\n")
        p = SSEParser(max_line=10)
        with self.assertRaises(SSEError):
            for _ in range(5):
                p.feed(b"data: 123\n")  # each line fits; the event does not
        p = SSEParser(max_line=10)
        with self.assertRaises(SSEError):
            for _ in range(20):
                p.feed(b"x")  # a line that never ends
        self.assertTrue(issubclass(SSEError, fence.FenceError))


class FuzzTest(unittest.TestCase):
    def test_against_the_reference(self) -> None:
        rng = random.Random(SEED)
        for i in range(ITERATIONS):
            data = random_stream(rng)
            want = reference(data)
            for how, chunks in (("whole", [data]), ("chunks", random_chunks(rng, data))):
                try:
                    got = parse(chunks)
                except Exception as e:  # noqa: BLE001
                    self.fail("seed %d iteration %d (%s): %r raised %r" % (SEED, i, how, data, e))
                self.assertEqual(got, want, "seed %d iteration %d (%s): %r" % (SEED, i, how, data))

    def test_only_the_documented_error(self) -> None:
        rng = random.Random(SEED + 1)
        for i in range(ITERATIONS):
            data = random_stream(rng) * rng.choice([1, 1, 3])
            p = SSEParser(max_line=rng.choice([1, 4, 16, 64, 1 << 20]))
            try:
                for ch in random_chunks(rng, data):
                    for ev in p.feed(ch):
                        try:
                            fence.decode_event(ev)
                        except SSEError:
                            pass
                p.close()
            except SSEError:
                pass
            except Exception as e:  # noqa: BLE001
                self.fail("seed %d iteration %d: %r raised %r, not SSEError" % (SEED + 1, i, data, e))

    def test_decode_event_only_raises_sse_error(self) -> None:
        rng = random.Random(SEED + 2)
        values = ["null", "true", "1", "-1", "1.5", "1e400", '"x"', "[]", "{}", '"2026-12-01T12:00:00Z"', '"2026-13-01T12:00:00Z"', "9223372036854775807", "99999999999999999999999"]
        names = ["type", "resource", "holder", "token", "last_fence", "revision", "key", "op", "expires_at", "time", "detail", "other"]
        for i in range(ITERATIONS):
            if rng.random() < 0.2:
                data = bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 40))).decode("utf-8", "replace")
            else:
                members = ['"%s":%s' % (rng.choice(names), rng.choice(values)) for _ in range(rng.randrange(0, 6))]
                data = "{" + ",".join(members) + "}"
                if rng.random() < 0.1:
                    data = "[" * rng.randrange(1, 5000) + data
            try:
                ev = fence.decode_event(fence.SSEEvent(type="message", data=data, id="s-%d" % i))
            except SSEError:
                continue
            except Exception as e:  # noqa: BLE001
                self.fail("seed %d iteration %d: %r raised %r, not SSEError" % (SEED + 2, i, data, e))
            self.assertIsInstance(ev, fence.Event)
            self.assertEqual(ev.id, "s-%d" % i)


if __name__ == "__main__":
    unittest.main()
