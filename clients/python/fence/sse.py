"""A Server-Sent Events (text/event-stream) parser that follows the WHATWG
HTML standard's rules ("Interpreting an event stream"): the stream is UTF-8
(invalid bytes become U+FFFD, one leading BOM is dropped); lines end in CR,
LF or CRLF, also when a CRLF is split between two reads; a line starting
with ':' is a comment; ``field: value`` lines (one space after the colon
dropped) set ``event``, ``data`` (joined with "\\n"), ``id`` (ignored if it
holds U+0000) and ``retry`` (ASCII digits only, clamped to a day); other fields are ignored;
a blank line dispatches the event, and an event without data is not
dispatched; an event the stream ends before its blank line is discarded.

The parser is incremental: :meth:`SSEParser.feed` takes bytes as they
arrive, in any chunks, and returns the events they complete. The only error
it raises is :class:`fence.SSEError`, for a line or an event's data longer
than ``max_line``.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from typing import List, Optional

from .errors import SSEError

__all__ = ["SSEEvent", "SSEParser", "MAX_LINE"]

#: The default limit on a line, and on an event's data, in characters.
MAX_LINE = 1 << 20

#: The longest reconnection time a stream may set, in milliseconds (a day).
MAX_RETRY = 24 * 60 * 60 * 1000

_EOL = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class SSEEvent:
    """One dispatched event: its type (``"message"`` if the stream named
    none), its data, and the stream's last event ID when it was dispatched
    (its own ``id`` field, or the one before it)."""

    type: str
    data: str
    id: str


class SSEParser:
    """Incremental event-stream parser. ``last_event_id`` is the stream's
    last event ID (set at each dispatch, kept across events, and what a
    reconnecting client sends as Last-Event-ID); ``retry`` is the
    reconnection time in milliseconds the stream last set, None if none.
    Start a new parser for each connection, passing the previous one's
    ``last_event_id``."""

    def __init__(self, last_event_id: str = "", max_line: int = MAX_LINE) -> None:
        self.last_event_id = last_event_id
        self.retry: Optional[int] = None
        self.max_line = max_line
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._started = False
        self._pending_cr = False
        self._parts: List[str] = []
        self._part_len = 0
        self._id_buf = last_event_id
        self._type_buf = ""
        self._data: List[str] = []
        self._data_len = 0
        self._has_data = False

    def feed(self, data: bytes) -> List[SSEEvent]:
        """Parse the next bytes of the stream and return the events they
        complete, in order. Raise :class:`fence.SSEError` if a line or an
        event's data exceeds ``max_line``."""
        text = self._decoder.decode(bytes(data))
        return self._text(text)

    def close(self) -> List[SSEEvent]:
        """End the stream: flush the decoder and drop an event that had no
        blank line yet. Returns the events completed by the flush (a final
        line end hidden in the decoder's buffer cannot complete one, so this
        is normally empty)."""
        events = self._text(self._decoder.decode(b"", final=True))
        self._parts = []
        self._part_len = 0
        self._type_buf = ""
        self._data = []
        self._data_len = 0
        self._has_data = False
        return events

    def _text(self, text: str) -> List[SSEEvent]:
        events: List[SSEEvent] = []
        if not text:
            return events
        if not self._started:
            self._started = True
            if text[0] == "\ufeff":
                text = text[1:]
        i = 0
        if self._pending_cr and text:
            self._pending_cr = False
            if text[0] == "\n":
                i = 1
        n = len(text)
        while i < n:
            m = _EOL.search(text, i)
            if m is None:
                self._append(text[i:])
                break
            self._append(text[i : m.start()])
            line = "".join(self._parts)
            self._parts = []
            self._part_len = 0
            if m.group() == "\r" and m.end() == n:
                self._pending_cr = True  # a LF may follow in the next read
            i = m.end()
            ev = self._line(line)
            if ev is not None:
                events.append(ev)
        return events

    def _append(self, s: str) -> None:
        if not s:
            return
        self._part_len += len(s)
        if self._part_len > self.max_line:
            raise SSEError("event stream: a line longer than %d characters" % self.max_line)
        self._parts.append(s)

    def _line(self, line: str) -> Optional[SSEEvent]:
        if line == "":
            return self._dispatch()
        if line[0] == ":":
            return None
        field, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if field == "event":
            self._type_buf = value
        elif field == "data":
            self._data_len += len(value) + 1
            if self._data_len > self.max_line + 1:
                raise SSEError("event stream: an event's data is longer than %d characters" % self.max_line)
            self._data.append(value)
            self._has_data = True
        elif field == "id":
            if "\x00" not in value:
                self._id_buf = value
        elif field == "retry":
            if value and all("0" <= c <= "9" for c in value):
                # Clamped to a day, as the Go reader does (and int() of a
                # very long digit string is refused by newer Pythons).
                self.retry = min(int(value), MAX_RETRY) if len(value) <= 12 else MAX_RETRY
        return None

    def _dispatch(self) -> Optional[SSEEvent]:
        self.last_event_id = self._id_buf
        if not self._has_data:
            self._type_buf = ""
            return None
        ev = SSEEvent(type=self._type_buf or "message", data="\n".join(self._data), id=self.last_event_id)
        self._type_buf = ""
        self._data = []
        self._data_len = 0
        self._has_data = False
        return ev
