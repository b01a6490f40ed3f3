"""verify_webhook: Standard Webhooks verification of timerq's deliveries."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Mapping, Optional, Sequence, Union

WEBHOOK_TOLERANCE_SECONDS = 300
"""How far webhook-timestamp may be from now: 5 minutes, as Standard
Webhooks says."""


class WebhookVerificationError(Exception):
    """A delivery verify_webhook refused: a header missing, a timestamp too
    far from now, or no signature any of the secrets made over the body.
    Answer it 401 and do not act on it."""


@dataclass(frozen=True)
class VerifiedWebhook:
    """What a verified delivery's headers say."""

    id: str
    """webhook-id: the same on every attempt of one fire; deduplicate by it."""
    timestamp: datetime
    """webhook-timestamp: when this attempt was signed."""


_B64 = re.compile(r"^[A-Za-z0-9+/]+={0,2}$")
_UNIX = re.compile(r"^[0-9]{1,15}$")


def _key(secret: str) -> bytes:
    b64 = secret[len("whsec_"):] if secret.startswith("whsec_") else secret
    if not b64 or len(b64) % 4 or not _B64.match(b64):
        raise ValueError('timerq: verify_webhook: the secret is not "whsec_" and standard base64')
    try:
        return base64.b64decode(b64, validate=True)
    except binascii.Error:
        raise ValueError('timerq: verify_webhook: the secret is not "whsec_" and standard base64') from None


def _header(headers: Any, name: str) -> Optional[str]:
    get = getattr(headers, "get", None)
    v = get(name) if get is not None else None
    if v is None and isinstance(headers, Mapping):
        for k in headers:
            if isinstance(k, str) and k.lower() == name:
                v = headers[k]
                break
    if isinstance(v, (list, tuple)):
        v = v[0] if v else None
    if isinstance(v, bytes):
        v = v.decode("latin-1")
    return v


def verify_webhook(secret: Union[str, Sequence[str]], headers: Any, body: Union[bytes, str], *,
                   tolerance: int = WEBHOOK_TOLERANCE_SECONDS, now: Optional[float] = None) -> VerifiedWebhook:
    """Checks a delivery timerq signed, as Standard Webhooks specifies, and
    returns its webhook-id and webhook-timestamp; raises
    WebhookVerificationError otherwise.

    secret: the endpoint's signing secret, "whsec_" and the base64 of its
    key, or a list of them during a key rotation (a signature by any
    verifies); a secret that is not that raises ValueError. headers: the
    request's headers, any mapping (http.server's self.headers, a dict,
    Django's request.headers; names in any case). body: the bytes as
    received: JSON parsed and serialised again is other bytes and does not
    verify; a str is taken as its UTF-8 bytes. tolerance: seconds
    webhook-timestamp may be from now (Unix seconds, time.time() unless
    now is given).

    It checks that webhook-id, webhook-timestamp and webhook-signature are
    there, that the timestamp is within tolerance, and that one "v1,<base64>"
    signature of webhook-signature is the HMAC-SHA256 of
    "<webhook-id>.<webhook-timestamp>.<body>" under a secret's key,
    compared in constant time.
    """
    keys = [_key(s) for s in ([secret] if isinstance(secret, str) else list(secret))]
    if not keys:
        raise ValueError("timerq: verify_webhook: no secret given")
    msg_id, ts, sigs = (_header(headers, h) for h in ("webhook-id", "webhook-timestamp", "webhook-signature"))
    if not msg_id or not ts or not sigs:
        raise WebhookVerificationError("a webhook-id, webhook-timestamp or webhook-signature header is missing")
    if not _UNIX.match(ts):
        raise WebhookVerificationError(f"webhook-timestamp {ts[:32]!r} is not Unix seconds")
    sent = int(ts)
    off = int(time.time() if now is None else now) - sent
    if off > tolerance or off < -tolerance:
        raise WebhookVerificationError(
            f"webhook-timestamp is {abs(off)} s {'old' if off > 0 else 'ahead'}, more than the {tolerance} s allowed")
    data = body.encode("utf-8") if isinstance(body, str) else bytes(body)
    signed = f"{msg_id}.{ts}.".encode("utf-8") + data
    candidates = [s[3:].encode("utf-8") for s in sigs.split(" ") if s.startswith("v1,")]
    for key in keys:
        want = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest())
        for got in candidates:
            if hmac.compare_digest(got, want):
                return VerifiedWebhook(id=msg_id, timestamp=datetime.fromtimestamp(sent, tz=timezone.utc))
    raise WebhookVerificationError(
        f"none of the {len(candidates)} v1 signatures matches any of the {len(keys)} secrets "
        "(is the body the raw bytes received?)")
