// A Server-Sent Events parser (text/event-stream) as the WHATWG HTML
// standard defines it: lines end in CR, LF or CRLF (also across chunks);
// "field: value" lines with one leading space stripped; id, event, data and
// retry fields; comments starting with ':'; an event is dispatched by a blank
// line; a leading byte order mark is skipped; an event that the stream ends
// before its blank line is discarded.

/** One dispatched event. */
export interface SSEEvent {
  /** The event field; "message" when it had none. */
  type: string;
  /** The data fields, joined by "\n". */
  data: string;
  /** The stream's last event ID when the event was dispatched. */
  lastEventId: string;
}

/** The error SSEParser throws for a line or an event over its limit; the only error it throws. */
export class SSEError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "SSEError";
  }
}

/** Options of an SSEParser. */
export interface SSEParserOptions {
  /** The last event ID to start from (the one a reconnect sent as Last-Event-ID). */
  lastEventId?: string;
  /** Called with the text of each comment line (after the ':'). */
  onComment?: (text: string) => void;
  /** Called with each valid retry field's reconnection time, in milliseconds. */
  onRetry?: (ms: number) => void;
  /** The longest line accepted, in UTF-16 code units. Default 1 MiB. */
  maxLineLength?: number;
  /** The most data one event may buffer, in UTF-16 code units. Default 16 MiB. */
  maxEventSize?: number;
}

/**
 * An incremental event stream parser. Feed it the bytes of one connection
 * with push (or decoded text with pushText), in chunks of any size, and it
 * returns the events each chunk completes; end() at the end of the stream.
 * It throws nothing but SSEError, and that only for input over its limits.
 */
export class SSEParser {
  #decoder = new TextDecoder("utf-8"); // replaces bad bytes with U+FFFD; skips a leading BOM
  #pending = ""; // the current line so far
  #cr = false; // the last chunk ended in CR: a LF first in the next is part of that line end
  #data = "";
  #hasData = false;
  #type = "";
  #idBuffer: string;
  #lastEventId: string;
  #retry: number | undefined;
  readonly #opts: SSEParserOptions;
  readonly #maxLine: number;
  readonly #maxEvent: number;

  constructor(options: SSEParserOptions = {}) {
    this.#opts = options;
    this.#idBuffer = options.lastEventId ?? "";
    this.#lastEventId = this.#idBuffer;
    this.#maxLine = options.maxLineLength ?? 1 << 20;
    this.#maxEvent = options.maxEventSize ?? 16 << 20;
  }

  /** The stream's last event ID: set when an event is dispatched (also one without data). */
  get lastEventId(): string {
    return this.#lastEventId;
  }

  /** The reconnection time the stream last set with a retry field, undefined if none. */
  get retry(): number | undefined {
    return this.#retry;
  }

  /** Parses the next bytes of the stream (UTF-8) and returns the events they complete. */
  push(chunk: Uint8Array): SSEEvent[] {
    return this.pushText(this.#decoder.decode(chunk, { stream: true }));
  }

  /** Parses the next text of the stream, already decoded (a BOM in it is not skipped), and returns the events it completes. */
  pushText(text: string): SSEEvent[] {
    const out: SSEEvent[] = [];
    const n = text.length;
    let i = 0;
    if (this.#cr) {
      if (n === 0) return out;
      this.#cr = false;
      if (text.charCodeAt(0) === 0x0a) i = 1;
    }
    let start = i;
    while (i < n) {
      const c = text.charCodeAt(i);
      if (c !== 0x0a && c !== 0x0d) {
        i++;
        continue;
      }
      const part = text.slice(start, i);
      const line = this.#pending === "" ? part : this.#pending + part;
      this.#pending = "";
      if (line.length > this.#maxLine) throw new SSEError(`sse: line of ${line.length} characters, more than ${this.#maxLine}`);
      this.#line(line, out);
      i++;
      if (c === 0x0d) {
        if (i < n) {
          if (text.charCodeAt(i) === 0x0a) i++;
        } else {
          this.#cr = true;
        }
      }
      start = i;
    }
    if (start < n) {
      this.#pending += text.slice(start);
      if (this.#pending.length > this.#maxLine) {
        throw new SSEError(`sse: line of more than ${this.#maxLine} characters`);
      }
    }
    return out;
  }

  /** Ends the stream: an incomplete event is discarded. Returns the events still to dispatch (always none). */
  end(): SSEEvent[] {
    const rest = this.#decoder.decode();
    const out = rest === "" ? [] : this.pushText(rest);
    this.#pending = "";
    this.#cr = false;
    this.#data = "";
    this.#hasData = false;
    this.#type = "";
    this.#decoder = new TextDecoder("utf-8");
    return out;
  }

  #line(line: string, out: SSEEvent[]): void {
    if (line === "") {
      this.#dispatch(out);
      return;
    }
    if (line.charCodeAt(0) === 0x3a) {
      this.#opts.onComment?.(line.slice(1));
      return;
    }
    const colon = line.indexOf(":");
    let field: string, value: string;
    if (colon < 0) {
      field = line;
      value = "";
    } else {
      field = line.slice(0, colon);
      value = line.slice(colon + 1);
      if (value.charCodeAt(0) === 0x20) value = value.slice(1);
    }
    switch (field) {
      case "event":
        this.#type = value;
        break;
      case "data":
        if (this.#data.length + value.length + 1 > this.#maxEvent) {
          throw new SSEError(`sse: event data of more than ${this.#maxEvent} characters`);
        }
        this.#data += value + "\n";
        this.#hasData = true;
        break;
      case "id":
        if (!value.includes("\0")) this.#idBuffer = value;
        break;
      case "retry":
        if (/^[0-9]+$/.test(value)) {
          const ms = Number(value);
          this.#retry = ms;
          this.#opts.onRetry?.(ms);
        }
        break;
      default:
        break; // other fields are ignored
    }
  }

  #dispatch(out: SSEEvent[]): void {
    this.#lastEventId = this.#idBuffer;
    if (!this.#hasData) {
      this.#data = "";
      this.#type = "";
      return;
    }
    const data = this.#data.slice(0, -1); // the last LF
    out.push({ type: this.#type === "" ? "message" : this.#type, data, lastEventId: this.#lastEventId });
    this.#data = "";
    this.#hasData = false;
    this.#type = "";
  }
}
