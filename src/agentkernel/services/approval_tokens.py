"""Decision tokens: what an approval's decision URL carries, signed so only this install makes them.

A token says one decision (`approve` or `deny`) of one call of one run,
until when, and a random nonce: url-safe base64 of that (compact JSON),
a dot, and the HMAC-SHA256 of it keyed by the install's secret
(services/install_secret.py) and bound to this purpose. Verifying compares
signatures in constant time (`hmac.compare_digest`) before reading anything
of the payload. Whether the token was used already is the store's to say
(services/approvals.py keeps each used nonce, in the decision's own
transaction): this module only makes and checks the text.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass

from agentkernel.errors import AgentKernelError

PURPOSE = b"agentkernel approval decision 1\n"  # a key used for something else signs nothing valid here
MAX_TOKEN_CHARS = 8192  # longer is refused unread (a run id and a call id are far shorter)
NONCE_BYTES = 16
FORGED, EXPIRED, USED, ELSEWHERE = "forged", "expired", "used", "for another approval"


class TokenRefused(AgentKernelError):
    """A decision token that decides nothing; `reason` is FORGED, EXPIRED, USED or ELSEWHERE."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"decision token refused ({reason}): {detail}")
        self.reason = reason


@dataclass(frozen=True)
class DecisionToken:
    """What a token grants: `decision` of call `call_id` of run `run_id`, once, until `expires_at`."""

    run_id: str
    call_id: str
    decision: str
    expires_at: float  # wall-clock seconds: the approval's own expiry
    nonce: str

    @classmethod
    def new(cls, run_id: str, call_id: str, decision: str, expires_at: float) -> DecisionToken:
        import secrets  # when a token is made, not by every kernel that could make one

        return cls(run_id, call_id, decision, expires_at, secrets.token_urlsafe(NONCE_BYTES))


def sign(token: DecisionToken, secret: bytes) -> str:
    """The token's text: payload and signature, both url-safe base64 without padding."""
    fields = [token.run_id, token.call_id, token.decision, token.expires_at, token.nonce]
    payload = json.dumps(fields, separators=(",", ":")).encode()
    return f"{_b64(payload)}.{_b64(_mac(payload, secret))}"


def verify(text: str, secret: bytes) -> DecisionToken:
    """The token `text` stands for; TokenRefused (FORGED) unless this install signed it as it is."""
    if len(text) > MAX_TOKEN_CHARS:
        raise TokenRefused(FORGED, f"{len(text)} characters, more than a token has ({MAX_TOKEN_CHARS})")
    payload_text, dot, mac_text = text.partition(".")
    payload, mac = _unb64(payload_text), _unb64(mac_text)
    if not dot or payload is None or mac is None:
        raise TokenRefused(FORGED, "not a decision token (two url-safe base64 parts joined by a dot)")
    import hmac  # (OpenSSL's library) when a token is read or made, not by every kernel that could

    if not hmac.compare_digest(mac, _mac(payload, secret)):
        raise TokenRefused(FORGED, "its signature is not this installation's")
    run_id, call_id, decision, expires_at, nonce = json.loads(payload)
    return DecisionToken(run_id, call_id, decision, float(expires_at), nonce)


def _mac(payload: bytes, secret: bytes) -> bytes:
    import hashlib
    import hmac

    return hmac.new(secret, PURPOSE + payload, hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes | None:
    """`text` decoded, or None unless it is exactly what `_b64` writes (one spelling per token)."""
    try:
        data = base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        return None
    return data if _b64(data) == text else None


__all__ = [
    "ELSEWHERE",
    "EXPIRED",
    "FORGED",
    "USED",
    "DecisionToken",
    "TokenRefused",
    "sign",
    "verify",
]
