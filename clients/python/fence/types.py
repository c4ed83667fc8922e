"""The values the fence API answers with, as dataclasses, and the helpers
that check tokens and parse its timestamps."""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from .errors import InvalidTokenError

__all__ = [
    "MAX_TOKEN",
    "LeaseInfo",
    "LockStatus",
    "LockInfo",
    "LockPage",
    "RevokeResult",
    "RevokeAsked",
    "WriteResult",
    "Item",
    "ClusterServer",
    "ClusterStatus",
    "Compare",
    "Put",
    "Delete",
    "check_token",
    "parse_time",
]

#: The largest valid fencing token, 2^63-1.
MAX_TOKEN = (1 << 63) - 1

_TIME = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?([Zz]|[+-]\d{2}:\d{2})$"
)


def parse_time(s: str) -> _dt.datetime:
    """Parse an RFC 3339 timestamp as the server writes it (UTC, up to nine
    fractional digits) into an aware datetime; digits past microseconds are
    truncated. Raises ValueError for anything else."""
    if not isinstance(s, str):
        raise ValueError("timestamp %r is not a string" % (s,))
    m = _TIME.match(s)
    if not m:
        raise ValueError("timestamp %r is not RFC 3339" % (s,))
    y, mo, d, h, mi, sec, frac, tz = m.groups()
    us = int((frac or "0")[:6].ljust(6, "0"))
    if tz in ("Z", "z"):
        tzinfo = _dt.timezone.utc
    else:
        sign = 1 if tz[0] == "+" else -1
        off = _dt.timedelta(hours=int(tz[1:3]), minutes=int(tz[4:6]))
        tzinfo = _dt.timezone(sign * off)
    return _dt.datetime(int(y), int(mo), int(d), int(h), int(mi), int(sec), us, tzinfo=tzinfo)


def check_token(token: Any, what: str = "token") -> int:
    """Return ``token`` if it is a valid fencing token, a Python int in
    1..2^63-1 (bool excluded); else raise :class:`InvalidTokenError` without
    sending anything."""
    if isinstance(token, bool) or not isinstance(token, int):
        raise InvalidTokenError("%s %r is not an int" % (what, token))
    if not 1 <= token <= MAX_TOKEN:
        raise InvalidTokenError("%s %d is not in 1..2^63-1" % (what, token))
    return token


def _opt_time(v: Any) -> Optional[_dt.datetime]:
    if v is None or v == "":
        return None
    return parse_time(v)


def _opt_session(v: Any) -> Optional["SessionRef"]:
    """The session of a JSON ``session`` member, None if it is absent."""
    if not v:
        return None
    return SessionRef(v["resource"], v["token"])


#: The prefix of every session resource: a session is a lease on
#: ``.session/NAME``, opened by acquiring it, renewed by renewing it and
#: closed by releasing it.
SESSION_PREFIX = ".session/"


def session_resource(name: str) -> str:
    """The resource of the session called ``name``."""
    return SESSION_PREFIX + name


@dataclass(frozen=True)
class SessionRef:
    """A session: the lease on its session resource that is it."""

    resource: str
    token: int

    @classmethod
    def of(cls, lease: Any) -> "SessionRef":
        """The session that ``lease`` (a :class:`SessionRef`, a
        :class:`LeaseInfo` or a :class:`fence.Lease` on a session resource)
        is; ``ValueError`` or :class:`InvalidTokenError` if it is none."""
        resource, token = getattr(lease, "resource", None), getattr(lease, "token", None)
        if not isinstance(resource, str) or not resource.startswith(SESSION_PREFIX) or resource == SESSION_PREFIX:
            raise ValueError("session %r is not a lease on a session resource (%sNAME)" % (resource, SESSION_PREFIX))
        return cls(resource, check_token(token, "session token"))


@dataclass(frozen=True)
class LeaseInfo:
    """A lease as the server describes it, the answer to acquire and renew.
    ``ttl`` is in seconds; ``sequencer`` is None when the server signs
    nothing; ``session`` is the session the lease is in, None for none."""

    resource: str
    holder: str
    token: int
    ttl: float
    expires_at: _dt.datetime
    sequencer: Optional[str] = None
    session: Optional[SessionRef] = None
    #: True for a shared hold: ``token`` is its group's (renew and release
    #: name ``holder``).
    shared: bool = False
    #: When the server revokes the lease, its holder asked to let go
    #: (:meth:`fence.Client.ask_to_release`); None if nobody asked.
    revoke_at: Optional[_dt.datetime] = None
    #: In a session's renewal: the leases in the session that a caller asked
    #: to let go, in byte order of resource (they send no renewal of their
    #: own); empty if none. One listed and then no longer, not released by
    #: its holder, was revoked.
    asked: Tuple["AskedLease", ...] = ()

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "LeaseInfo":
        """Build it from the API's JSON object."""
        return cls(
            resource=d["resource"],
            holder=d["holder"],
            token=d["token"],
            ttl=d["ttl_ms"] / 1000.0,
            expires_at=parse_time(d["expires_at"]),
            sequencer=d.get("sequencer") or None,
            session=_opt_session(d.get("session")),
            shared=d.get("mode") == "shared",
            revoke_at=_opt_time(d.get("revoke_at")),
            asked=tuple(AskedLease(a["resource"], a["token"], parse_time(a["revoke_at"])) for a in d.get("asked") or ()),
        )


@dataclass(frozen=True)
class AskedLease:
    """A lease in a session that a caller asked to let go, as the session's
    renewal lists it (:attr:`LeaseInfo.asked`)."""

    resource: str
    token: int
    revoke_at: _dt.datetime


@dataclass(frozen=True)
class LockStatus:
    """GET /v1/locks/{resource}: whether the lock is held, by whom, and the
    highest token issued for the resource. ``holder``, ``token`` and
    ``expires_at`` are None while it is free."""

    resource: str
    held: bool
    last_token: int
    holder: Optional[str] = None
    token: Optional[int] = None
    expires_at: Optional[_dt.datetime] = None
    #: True while a group of shared holders holds it: ``holders`` names
    #: them (byte order) and ``holder`` is None.
    shared: bool = False
    holders: Tuple[str, ...] = ()
    #: When the lease is revoked, its holder asked to let go; None if not.
    revoke_at: Optional[_dt.datetime] = None
    #: The session the held lease is in; None for a lease of its own, or
    #: while free.
    session: Optional[SessionRef] = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "LockStatus":
        """Build it from the API's JSON object."""
        return cls(
            resource=d["resource"],
            held=bool(d["held"]),
            last_token=d.get("last_token", 0),
            holder=d.get("holder") or None,
            token=d.get("token") or None,
            expires_at=_opt_time(d.get("expires_at")),
            shared=d.get("mode") == "shared",
            holders=tuple(d.get("holders") or ()),
            revoke_at=_opt_time(d.get("revoke_at")),
            session=_opt_session(d.get("session")),
        )


@dataclass(frozen=True)
class LockInfo:
    """One held lock of a listing (GET /v1/locks); ``waiters`` counts the
    acquires waiting for it."""

    resource: str
    holder: str
    token: int
    expires_at: _dt.datetime
    waiters: int = 0
    #: True for a shared group: ``holders`` names its holders (byte order),
    #: ``token`` is the group's and ``holder`` is "".
    shared: bool = False
    holders: Tuple[str, ...] = ()
    #: The session the lease is in; None for a lease of its own.
    session: Optional[SessionRef] = None
    #: When the lease is revoked, its holder asked to let go
    #: (:meth:`fence.Client.ask_to_release`); None if nobody asked.
    revoke_at: Optional[_dt.datetime] = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "LockInfo":
        """Build it from the API's JSON object."""
        return cls(
            resource=d["resource"],
            holder=d["holder"],
            token=d["token"],
            expires_at=parse_time(d["expires_at"]),
            waiters=d.get("waiters", 0),
            shared=d.get("mode") == "shared",
            holders=tuple(d.get("holders") or ()),
            session=_opt_session(d.get("session")),
            revoke_at=_opt_time(d.get("revoke_at")),
        )


@dataclass(frozen=True)
class LockPage:
    """One page of a listing; ``next`` is the ``after`` of the next page,
    None on the last."""

    locks: List[LockInfo]
    next: Optional[str] = None


@dataclass(frozen=True)
class FenceInfo:
    """A resource's fencing state, from a listing of the fences: the last
    token the lock service issued for it and the highest token its storage
    accepted or a grant raised its fence to."""

    resource: str
    last_token: int
    last_fence: int

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "FenceInfo":
        return cls(resource=d["resource"], last_token=check_token(d["last_token"]), last_fence=check_token(d["last_fence"]))


@dataclass(frozen=True)
class FencePage:
    """One page of a listing of the fences; ``next`` is the ``after`` of the
    next page, None on the last."""

    fences: List[FenceInfo]
    next: Optional[str] = None


@dataclass(frozen=True)
class RevokeResult:
    """The answer to a revoke: the token of the lease it ended (0 if the
    resource was free) and the resource's new last fence."""

    resource: str
    revoked_token: int
    last_fence: int


@dataclass(frozen=True)
class RevokeAsked:
    """The answer to :meth:`fence.Client.ask_to_release` of a held resource:
    the lease asked to let go (``holder`` None and ``shared`` True for a
    shared group), revoked at ``revoke_at`` unless it is released first."""

    resource: str
    token: int
    revoke_at: _dt.datetime
    holder: Optional[str] = None
    shared: bool = False


@dataclass(frozen=True)
class Transferred:
    """The answer to a transfer: the successor's lease, as observers see it
    (its sequencer is the successor's, not sent)."""

    resource: str
    holder: str
    token: int
    expires_at: _dt.datetime

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Transferred":
        """Build it from the API's JSON object."""
        return cls(resource=d["resource"], holder=d["holder"], token=d["token"], expires_at=parse_time(d["expires_at"]))


@dataclass(frozen=True)
class WriteResult:
    """The answer to a put or delete: the write's store revision and the
    resource's fence after it (for a delete, the token presented)."""

    resource: str
    key: str
    revision: int
    fence: int


@dataclass(frozen=True)
class Item:
    """A stored value: its bytes, its revision (the ETag) and the token of
    the write that stored it."""

    resource: str
    key: str
    value: bytes
    revision: int
    token: int


@dataclass(frozen=True)
class ClusterServer:
    """One server of a cluster: its advertise URL ("" for an embedded
    store's) and role."""

    url: str
    role: str


@dataclass(frozen=True)
class ClusterStatus:
    """GET /v1/cluster: this server's role, the leader's URL ("" while none
    leads), the writer epoch, the store's engine and the servers."""

    role: str
    leader: str
    epoch: int
    store: str
    servers: List[ClusterServer] = field(default_factory=list)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "ClusterStatus":
        """Build it from the API's JSON object."""
        return cls(
            role=d.get("role", ""),
            leader=d.get("leader", ""),
            epoch=d.get("epoch", 0),
            store=d.get("store", ""),
            servers=[ClusterServer(url=s.get("url", ""), role=s.get("role", "")) for s in d.get("servers") or []],
        )


@dataclass(frozen=True)
class Compare:
    """A txn compare: ``resource``/``key`` is at ``revision`` (0: absent)."""

    resource: str
    key: str
    revision: int

    def to_json(self) -> dict:
        """The API's JSON object."""
        return {"resource": self.resource, "key": self.key, "revision": self.revision}


@dataclass(frozen=True)
class Put:
    """A txn op that stores ``value`` (bytes are sent as ``value_base64``,
    str as ``value``) under ``resource``/``key``."""

    resource: str
    key: str
    value: Union[bytes, str]

    def to_json(self) -> dict:
        """The API's JSON object."""
        import base64

        if isinstance(self.value, str):
            return {"op": "put", "resource": self.resource, "key": self.key, "value": self.value}
        return {
            "op": "put",
            "resource": self.resource,
            "key": self.key,
            "value_base64": base64.b64encode(bytes(self.value)).decode("ascii"),
        }


@dataclass(frozen=True)
class Delete:
    """A txn op that deletes ``resource``/``key``."""

    resource: str
    key: str

    def to_json(self) -> dict:
        """The API's JSON object."""
        return {"op": "delete", "resource": self.resource, "key": self.key}
