"""timerq-client: a client for timerq's HTTP API (durable millisecond
timers in Redis), and verify_webhook for the Standard Webhooks deliveries
timerq signs. The standard library only. README.md shows both."""

from ._client import Client, FireStream, NewTimer, When
from .types import STALE_EPOCH, CancelJob, EpochBumped, FireEvent, OwnerState, StaleEpochError, Timer, TimerPage, TimerqError
from .webhook import WEBHOOK_TOLERANCE_SECONDS, VerifiedWebhook, WebhookVerificationError, verify_webhook

__version__ = "0.2.0"
"""This package's version, as pyproject.toml has it."""

__all__ = [
    "CancelJob",
    "Client",
    "EpochBumped",
    "FireEvent",
    "FireStream",
    "NewTimer",
    "OwnerState",
    "STALE_EPOCH",
    "StaleEpochError",
    "Timer",
    "TimerPage",
    "TimerqError",
    "VerifiedWebhook",
    "WEBHOOK_TOLERANCE_SECONDS",
    "WebhookVerificationError",
    "When",
    "verify_webhook",
]
