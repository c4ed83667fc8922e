"""What the client knows of the server's clock, for Fence-Deadline."""

from __future__ import annotations

import datetime as _dt
import threading
from typing import Optional

from .types import LeaseInfo

#: The longest round trip a lease answer may have taken for the clock to
#: learn from it: the estimate is within half of it.
MAX_CLOCK_RTT = 0.5


class ServerClock:
    """How far the server's clock is ahead of this process's wall clock,
    learnt from the answers that renew an exclusive lease of the client's
    own: the server made the change at ``expires_at`` minus ``ttl``, at
    some moment between the request's sending and its answer. It knows
    nothing until it has learnt. Safe for concurrent use."""

    def __init__(self) -> None:
        self._mu = threading.Lock()
        self._known = False
        self._ahead = 0.0  # the server's clock minus ours, in seconds
        self._slack = 0.0  # half the round trip it was learnt from

    def learn(self, sent: float, rtt: float, info: LeaseInfo) -> None:
        """Learn from ``info``, a renewal's answer to a request sent at
        ``sent`` (wall clock) that took ``rtt`` seconds."""
        if rtt < 0 or rtt > MAX_CLOCK_RTT or info.shared or info.session is not None or info.ttl <= 0:
            return
        changed = info.expires_at.timestamp() - info.ttl
        with self._mu:
            self._known, self._ahead, self._slack = True, changed - (sent + rtt / 2), rtt / 2

    def to_server(self, wall: float) -> Optional[str]:
        """``wall`` (our wall clock) on the server's clock, late by the
        estimate's slack (a deadline errs towards serving), as RFC 3339;
        None while nothing is known."""
        with self._mu:
            if not self._known:
                return None
            t = wall + self._ahead + self._slack
        return _dt.datetime.fromtimestamp(t, tz=_dt.timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")

    def forget(self) -> None:
        """Drop the estimate: a server refused a deadline the client had not
        reached (another server leads now, its clock elsewhere)."""
        with self._mu:
            self._known = False
