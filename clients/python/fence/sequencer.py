"""Signed sequencers: a fencing token signed by the lock service, so that a
resource can check offline, with only the service's public keys (GET
/v1/keys), that the token was really issued for it.

Format, version 1 (as the Go package defines it)::

    base64url(payload) "." base64url(signature)      # unpadded, <= 2048 bytes

    payload = 0x01                                   # version
              uvarint len, kid        (1..64 bytes of [A-Za-z0-9_-])
              uvarint token           (1..2^63-1)
              uvarint expires         (Unix ms, 0 = not stated, <= 2^63-1)
              uvarint len, resource   (a valid resource name)
              uvarint len, holder     (a valid holder id)

The signature is Ed25519 (RFC 8032) over b"fence-seq-v1\\x00" + payload.
Exactly one encoding is accepted: shortest varints, no padding, no stray
bits, nothing after the payload.

:func:`parse_sequencer` is pure Python and always available. Verifying the
signature (:func:`verify_sequencer`) needs the ``cryptography`` package;
without it, it raises ImportError once the sequencer has parsed and its key
is known.
"""

from __future__ import annotations

import base64
import binascii
import datetime as _dt
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Mapping, Optional, Union

from .errors import InvalidSequencerError

try:  # pragma: no cover - depends on the environment
    from cryptography.exceptions import InvalidSignature as _InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey as _Ed25519PublicKey

    HAVE_CRYPTOGRAPHY = True
except ImportError:  # pragma: no cover
    HAVE_CRYPTOGRAPHY = False

__all__ = [
    "HAVE_CRYPTOGRAPHY",
    "MAX_SEQUENCER_LEN",
    "MAX_KEY_ID_LEN",
    "Sequencer",
    "PublicKey",
    "KeySet",
    "parse_sequencer",
    "verify_sequencer",
    "key_set",
]

#: The longest sequencer string, in bytes.
MAX_SEQUENCER_LEN = 2048
#: The longest key id, in bytes.
MAX_KEY_ID_LEN = 64

_MAX_NAME = 512
_MAX_HOLDER = 256
_MAX_INT64 = (1 << 63) - 1
_VERSION = 1
_CONTEXT = b"fence-seq-v1\x00"
_B64URL = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")

#: A key set: key id -> 32-byte raw Ed25519 public key.
KeySet = Dict[str, bytes]


@dataclass(frozen=True)
class Sequencer:
    """The content of a sequencer: the lock service's statement that
    ``token`` was issued to ``holder`` for ``resource``. ``expires_ms`` is
    Unix time in milliseconds (0: not stated); ``payload`` and ``signature``
    are the decoded bytes."""

    kid: str
    token: int
    expires_ms: int
    resource: str
    holder: str
    payload: bytes
    signature: bytes

    @property
    def expires(self) -> Optional[_dt.datetime]:
        """``expires_ms`` as an aware UTC datetime, None if not stated."""
        if self.expires_ms == 0:
            return None
        return _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc) + _dt.timedelta(milliseconds=self.expires_ms)


@dataclass(frozen=True)
class PublicKey:
    """A key that verifies sequencers: its id and 32 raw Ed25519 bytes. Its
    JSON form is an RFC 8037 JWK, as GET /v1/keys serves it."""

    kid: str
    key: bytes

    @classmethod
    def from_jwk(cls, jwk: Mapping[str, Any]) -> "PublicKey":
        """Parse a JWK as the Go client does: kty "OKP", crv "Ed25519", alg
        absent, "Ed25519" or "EdDSA", a valid kid, a 32-byte unpadded
        base64url x, and no private part ("d"). Raise ValueError otherwise."""
        if not isinstance(jwk, Mapping):
            raise ValueError("public key: a JWK must be a JSON object")
        kid = jwk.get("kid")
        if jwk.get("kty") != "OKP" or jwk.get("crv") != "Ed25519":
            raise ValueError("public key %r: kty %r crv %r, want OKP Ed25519" % (kid, jwk.get("kty"), jwk.get("crv")))
        alg = jwk.get("alg")
        if alg not in (None, "", "Ed25519", "EdDSA"):
            raise ValueError("public key %r: alg %r, want Ed25519" % (kid, alg))
        if "d" in jwk:
            raise ValueError("public key %r: contains a private key" % (kid,))
        if not isinstance(kid, str) or not _valid_kid(kid.encode("utf-8")):
            raise ValueError("public key: key id %r is not 1..%d characters of [A-Za-z0-9_-]" % (kid, MAX_KEY_ID_LEN))
        x = jwk.get("x")
        raw = _b64decode(x.encode("ascii", "replace")) if isinstance(x, str) else None
        if raw is None or len(raw) != 32:
            raise ValueError("public key %r: x is not 32 bytes of unpadded base64url" % (kid,))
        return cls(kid=kid, key=raw)

    def to_jwk(self) -> Dict[str, str]:
        """The JWK form."""
        return {"kty": "OKP", "crv": "Ed25519", "alg": "Ed25519", "kid": self.kid, "x": _b64encode(self.key)}


def _b64encode(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode("ascii")


def _b64decode(s: bytes) -> Optional[bytes]:
    """Strict unpadded base64url: only the alphabet, no '=', and zero
    padding bits (so each value has one encoding). None if not."""
    if any(c not in _B64URL for c in s) or len(s) % 4 == 1:
        return None
    try:
        b = base64.urlsafe_b64decode(s + b"=" * (-len(s) % 4))
    except (binascii.Error, ValueError):
        return None
    if _b64encode(b).encode("ascii") != s:
        return None  # non-zero padding bits
    return b


def _valid_kid(b: bytes) -> bool:
    return 1 <= len(b) <= MAX_KEY_ID_LEN and all(c in _B64URL for c in b)


def _valid_text(b: bytes, max_len: int) -> Optional[str]:
    """The name as str if it is 1..max_len bytes of UTF-8 without control
    characters (C0, DEL and C1, as Go's unicode.IsControl), else None."""
    if not 1 <= len(b) <= max_len:
        return None
    try:
        s = b.decode("utf-8")
    except UnicodeDecodeError:
        return None
    for ch in s:
        o = ord(ch)
        if o < 0x20 or 0x7F <= o <= 0x9F:
            return None
    return s


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


class _Decoder:
    def __init__(self, b: bytes) -> None:
        self.b = b
        self.i = 0

    def byte(self) -> int:
        if self.i >= len(self.b):
            raise ValueError("truncated")
        c = self.b[self.i]
        self.i += 1
        return c

    def uvarint(self) -> int:
        # As Go's binary.Uvarint: at most 10 bytes, the 10th at most 1.
        x = 0
        shift = 0
        for n in range(10):
            if self.i >= len(self.b):
                raise ValueError("truncated or overflowing varint")
            c = self.b[self.i]
            self.i += 1
            if c < 0x80:
                if n == 9 and c > 1:
                    raise ValueError("truncated or overflowing varint")
                return x | c << shift
            x |= (c & 0x7F) << shift
            shift += 7
        raise ValueError("truncated or overflowing varint")

    def bytes(self, max_len: int) -> bytes:
        n = self.uvarint()
        if n > max_len or n > len(self.b) - self.i:
            raise ValueError("field of %d bytes: longer than %d or truncated" % (n, max_len))
        v = self.b[self.i : self.i + n]
        self.i += n
        return v


def _malformed(msg: str) -> InvalidSequencerError:
    return InvalidSequencerError("invalid sequencer: malformed: %s" % msg, reason="malformed")


def parse_sequencer(sequencer: str) -> Sequencer:
    """Decode a sequencer WITHOUT verifying its signature, for logs and tools:
    never trust its result, use :func:`verify_sequencer`. Raise
    :class:`InvalidSequencerError` (reason ``"malformed"``) unless it is
    exactly in the format of version 1."""
    if isinstance(sequencer, bytes):
        raw = sequencer
    elif isinstance(sequencer, str):
        raw = sequencer.encode("utf-8", "surrogatepass")
    else:
        raise _malformed("not a string")
    if len(raw) > MAX_SEQUENCER_LEN:
        raise _malformed("%d bytes, more than %d" % (len(raw), MAX_SEQUENCER_LEN))
    p64, dot, sig64 = raw.partition(b".")
    if not dot or any(c not in _B64URL for c in p64) or any(c not in _B64URL for c in sig64):
        raise _malformed('not base64url(payload) "." base64url(signature)')
    payload = _b64decode(p64)
    if payload is None:
        raise _malformed("payload is not unpadded base64url")
    sig = _b64decode(sig64)
    if sig is None or len(sig) != 64:
        raise _malformed("signature is not 64 bytes of base64url")
    d = _Decoder(payload)
    try:
        version = d.byte()
        if version != _VERSION:
            raise _malformed("version %d, want %d" % (version, _VERSION))
        kid = d.bytes(MAX_KEY_ID_LEN)
        token = d.uvarint()
        exp = d.uvarint()
        resource = d.bytes(_MAX_NAME)
        holder = d.bytes(_MAX_HOLDER)
    except ValueError as e:
        raise _malformed("payload: %s" % e) from None
    if d.i != len(payload):
        raise _malformed("%d bytes after the payload" % (len(payload) - d.i))
    if exp > _MAX_INT64:
        raise _malformed("expires %d out of range" % exp)
    if not _valid_kid(kid):
        raise _malformed("key id %r is not 1..%d characters of [A-Za-z0-9_-]" % (kid, MAX_KEY_ID_LEN))
    if not 1 <= token <= _MAX_INT64:
        raise _malformed("token %d is not in 1..2^63-1" % token)
    res = _valid_text(resource, _MAX_NAME)
    if res is None:
        raise _malformed("resource %r is not a valid name" % (resource,))
    hol = _valid_text(holder, _MAX_HOLDER)
    if hol is None:
        raise _malformed("holder %r is not a valid holder id" % (holder,))
    again = (
        bytes([_VERSION])
        + _uvarint(len(kid))
        + kid
        + _uvarint(token)
        + _uvarint(exp)
        + _uvarint(len(resource))
        + resource
        + _uvarint(len(holder))
        + holder
    )
    if again != payload:
        raise _malformed("payload is not in canonical form")
    return Sequencer(
        kid=kid.decode("ascii"),
        token=token,
        expires_ms=exp,
        resource=res,
        holder=hol,
        payload=payload,
        signature=sig,
    )


KeysLike = Union[Mapping[str, Any], Iterable[Any]]


def key_set(keys: KeysLike) -> KeySet:
    """Normalise keys into a :data:`KeySet` (key id -> 32 raw bytes). Accepted:
    the answer of GET /v1/keys (``{"keys": [JWK, ...]}``), a list of JWK dicts
    or :class:`PublicKey`, or a mapping of key id to raw bytes or
    PublicKey."""
    out: KeySet = {}
    if isinstance(keys, Mapping) and "keys" in keys and not isinstance(keys.get("keys"), (bytes, bytearray)):
        keys = keys["keys"]
    if isinstance(keys, Mapping):
        for kid, v in keys.items():
            if isinstance(v, PublicKey):
                out[kid] = v.key
            elif isinstance(v, (bytes, bytearray)):
                out[kid] = bytes(v)
            else:
                out[kid] = PublicKey.from_jwk(v).key
        return out
    for k in keys:
        pk = k if isinstance(k, PublicKey) else PublicKey.from_jwk(k)
        out[pk.kid] = pk.key
    return out


def verify_sequencer(keys: KeysLike, sequencer: str, resource: str, token: int) -> Sequencer:
    """Check that ``sequencer`` is signed by a key of ``keys`` (see
    :func:`key_set`) for exactly ``resource`` and ``token``, and return its
    content. Otherwise raise :class:`InvalidSequencerError` whose ``reason``
    says which check failed: ``"malformed"``, ``"unknown key id"``,
    ``"bad signature"``, ``"wrong resource"`` or ``"wrong token"``. An expired
    sequencer is not rejected: staleness is the fence's to decide.

    Needs the ``cryptography`` package for the signature check; without it,
    raises ImportError (after the format and key id checks)."""
    ks = key_set(keys)
    seq = parse_sequencer(sequencer)
    pub = ks.get(seq.kid)
    if pub is None or len(pub) != 32:
        raise InvalidSequencerError("invalid sequencer: unknown key id %r" % seq.kid, reason="unknown key id")
    if not HAVE_CRYPTOGRAPHY:
        raise ImportError(
            "fence.verify_sequencer needs the 'cryptography' package to check Ed25519 signatures "
            "(pip install cryptography); fence.parse_sequencer works without it"
        )
    try:
        _Ed25519PublicKey.from_public_bytes(pub).verify(seq.signature, _CONTEXT + seq.payload)
    except (_InvalidSignature, ValueError):
        raise InvalidSequencerError(
            "invalid sequencer: bad signature (key id %r)" % seq.kid, reason="bad signature"
        ) from None
    if seq.resource != resource:
        raise InvalidSequencerError(
            "invalid sequencer: wrong resource: signed for %r, presented for %r" % (seq.resource, resource),
            reason="wrong resource",
        )
    if seq.token != token:
        raise InvalidSequencerError(
            "invalid sequencer: wrong token: signed for token %d, presented with %r" % (seq.token, token),
            reason="wrong token",
        )
    return seq
