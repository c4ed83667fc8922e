"""Python client of fence: a lock service that issues monotonic fencing
tokens, and fenced storage that enforces them.

    import fence

    client = fence.Client("http://127.0.0.1:7700")
    with client.lock("orders", ttl=10) as lease:
        lease.put("total", b"42")          # carries lease.token

See the README for the lease rules, the errors, watching and sequencers.
Standard library only; verifying sequencer signatures needs ``cryptography``.
"""

from .client import DEFAULT_RETRY_FOR, DEFAULT_TTL, MAX_LIMIT, Client, new_holder_id
from .errors import (
    CODES,
    BadRequestError,
    FencedError,
    FenceError,
    FenceRequiredError,
    ForbiddenError,
    InternalError,
    InvalidSequencerError,
    InvalidTokenError,
    LeaseEndedError,
    LeaseExpiredError,
    LeaseLostError,
    LockHeldError,
    MethodNotAllowedError,
    NotFoundError,
    NotLeaderError,
    NotReadyError,
    PreconditionFailedError,
    RateLimitedError,
    SSEError,
    TokenNotIssuedError,
    TooLargeError,
    TransportError,
    UnauthorizedError,
    UnavailableError,
    is_ambiguous,
    is_lost,
    problem_error,
)
from .lease import MUTATING_METHODS, Lease, StampingHandler
from .sequencer import (
    HAVE_CRYPTOGRAPHY,
    KeySet,
    PublicKey,
    Sequencer,
    key_set,
    parse_sequencer,
    verify_sequencer,
)
from .sse import SSEEvent, SSEParser
from .types import (
    MAX_TOKEN,
    ClusterServer,
    ClusterStatus,
    Compare,
    Delete,
    Item,
    LeaseInfo,
    LockInfo,
    LockPage,
    LockStatus,
    Put,
    RevokeResult,
    Transferred,
    WriteResult,
    check_token,
    parse_time,
)
from .watch import EVENT_TYPES, Event, Watch, decode_event

__version__ = "0.1.0"

__all__ = [
    "Client",
    "Lease",
    "StampingHandler",
    "MUTATING_METHODS",
    "new_holder_id",
    "DEFAULT_TTL",
    "DEFAULT_RETRY_FOR",
    "MAX_LIMIT",
    "MAX_TOKEN",
    "LeaseInfo",
    "LockStatus",
    "LockInfo",
    "LockPage",
    "RevokeResult",
    "Transferred",
    "WriteResult",
    "Item",
    "ClusterServer",
    "ClusterStatus",
    "Compare",
    "Put",
    "Delete",
    "check_token",
    "parse_time",
    "Watch",
    "Event",
    "EVENT_TYPES",
    "decode_event",
    "SSEParser",
    "SSEEvent",
    "Sequencer",
    "PublicKey",
    "KeySet",
    "key_set",
    "parse_sequencer",
    "verify_sequencer",
    "HAVE_CRYPTOGRAPHY",
    "CODES",
    "problem_error",
    "is_ambiguous",
    "is_lost",
    "FenceError",
    "FencedError",
    "TokenNotIssuedError",
    "LockHeldError",
    "LeaseLostError",
    "RateLimitedError",
    "FenceRequiredError",
    "InvalidTokenError",
    "InvalidSequencerError",
    "PreconditionFailedError",
    "NotFoundError",
    "BadRequestError",
    "TooLargeError",
    "UnauthorizedError",
    "ForbiddenError",
    "MethodNotAllowedError",
    "NotLeaderError",
    "UnavailableError",
    "NotReadyError",
    "InternalError",
    "TransportError",
    "LeaseExpiredError",
    "LeaseEndedError",
    "SSEError",
]
