/** What the client knows of the server's clock, for Fence-Deadline. */

/** The longest round trip a lease answer may have taken for the clock to learn from it, in ms: the estimate is within half of it. */
export const MAX_CLOCK_RTT_MS = 500;

/** What a renewal's answer says of the server's clock. */
export interface ClockSample {
  ttlMs: number;
  expiresAt: Date;
  shared?: boolean;
  session?: unknown;
}

/**
 * How far the server's clock is ahead of this process's (Date.now()),
 * learnt from the answers that renew an exclusive lease of the client's
 * own: the server made the change at expiresAt minus ttlMs, at some moment
 * between the request's sending and its answer. It knows nothing until it
 * has learnt.
 */
export class ServerClock {
  #known = false;
  #ahead = 0; // the server's clock minus ours, in ms
  #slack = 0; // half the round trip it was learnt from

  /** Learns from a renewal's answer to a request sent at sentMs (Date.now()) that took rttMs. */
  learn(sentMs: number, rttMs: number, l: ClockSample): void {
    if (rttMs < 0 || rttMs > MAX_CLOCK_RTT_MS || l.shared || l.session !== undefined || l.ttlMs <= 0) return;
    const changed = l.expiresAt.getTime() - l.ttlMs;
    this.#known = true;
    this.#ahead = changed - (sentMs + rttMs / 2);
    this.#slack = rttMs / 2;
  }

  /**
   * Returns wallMs (our Date.now() clock) on the server's clock, late by
   * the estimate's slack (a deadline errs towards serving), as RFC 3339;
   * undefined while nothing is known.
   */
  toServer(wallMs: number): string | undefined {
    if (!this.#known) return undefined;
    return new Date(Math.ceil(wallMs + this.#ahead + this.#slack)).toISOString();
  }

  /** Drops the estimate: a server refused a deadline the client had not reached (another server leads now, its clock elsewhere). */
  forget(): void {
    this.#known = false;
  }
}
