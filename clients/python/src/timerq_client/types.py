"""The API's shapes as dataclasses: what get, list, wait and the writes
return, parsed from the JSON the API answers (api/openapi.json's schemas
Timer, TimerPage, FireEvent and Problem)."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Dict, List, Optional


def parse_time(s: Optional[str]) -> Optional[datetime]:
    """Parses the API's RFC 3339 times (UTC, milliseconds, a Z) to an aware
    datetime; None stays None."""
    if s is None:
        return None
    # datetime.fromisoformat reads a Z only from Python 3.11.
    return datetime.fromisoformat(s[:-1] + "+00:00" if s.endswith("Z") else s)


@dataclass(frozen=True)
class Timer:
    """A timer's record (the schema Timer)."""

    id: str
    state: str
    """scheduled, fired or cancelled."""
    due_at: datetime
    created_at: Optional[datetime]
    fired_at: Optional[datetime]
    cancelled_at: Optional[datetime]
    payload: bytes
    created: Optional[bool] = None
    """Only in answers to creates: whether this call created the timer
    (False: it existed, and was left as it was)."""
    delivery: Optional[Dict[str, Any]] = None
    """The attempt log of a timer delivered to an endpoint, as the API
    answers it (attempts: status, error, times)."""
    extra: Dict[str, Any] = field(default_factory=dict)
    """Fields the API answered that this version does not know: a newer
    server's, kept rather than refused."""

    @property
    def text(self) -> str:
        """The payload decoded as UTF-8."""
        return self.payload.decode("utf-8")

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Timer":
        known = {"id", "state", "due_at", "created_at", "fired_at", "cancelled_at", "payload", "created", "delivery"}
        due = parse_time(d["due_at"])
        assert due is not None
        return cls(
            id=d["id"],
            state=d["state"],
            due_at=due,
            created_at=parse_time(d.get("created_at")),
            fired_at=parse_time(d.get("fired_at")),
            cancelled_at=parse_time(d.get("cancelled_at")),
            payload=base64.b64decode(d.get("payload") or ""),
            created=d.get("created"),
            delivery=d.get("delivery"),
            extra={k: v for k, v in d.items() if k not in known},
        )


@dataclass(frozen=True)
class TimerPage:
    """One page of a list (the schema TimerPage); next_cursor is empty on
    the last page."""

    timers: List[Timer]
    next_cursor: str
    malformed: List[Dict[str, Any]] = field(default_factory=list)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "TimerPage":
        return cls(
            timers=[Timer.from_json(t) for t in d["timers"]],
            next_cursor=d.get("next_cursor") or "",
            malformed=list(d.get("malformed") or []),
        )


@dataclass(frozen=True)
class FireEvent:
    """One fire of the namespace's stream (the schema FireEvent), and the
    SSE event ID to resume after it (Client.fires(last_event_id=...))."""

    id: str
    due_at: datetime
    fired_at: datetime
    payload: bytes
    shard: int
    stream_id: str
    event_id: str = ""
    extra: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, d: Dict[str, Any], event_id: str = "") -> "FireEvent":
        known = {"id", "due_at", "fired_at", "payload", "shard", "stream_id"}
        due, fired = parse_time(d["due_at"]), parse_time(d["fired_at"])
        assert due is not None and fired is not None
        return cls(
            id=d["id"],
            due_at=due,
            fired_at=fired,
            payload=base64.b64decode(d.get("payload") or ""),
            shard=int(d["shard"]),
            stream_id=d["stream_id"],
            event_id=event_id,
            extra={k: v for k, v in d.items() if k not in known},
        )


class TimerqError(Exception):
    """A call the API refused or failed, with the RFC 9457 problem it
    answered: type is urn:timerq:problem:<slug> (docs/api.md lists them;
    it never changes), field names a refused field as a JSON pointer."""

    def __init__(self, status: int, problem: Dict[str, Any]):
        self.status = status
        self.problem = problem
        self.type: str = problem.get("type", "about:blank")
        self.title: str = problem.get("title", "")
        self.detail: str = problem.get("detail", "")
        self.field: Optional[str] = problem.get("field")
        super().__init__(f"timerq: {status} {self.type}" + (f": {self.detail}" if self.detail else ""))
