"""The API's shapes as dataclasses: what get, list, wait and the writes
return, parsed from the JSON the API answers (api/openapi.json's schemas
Timer, TimerPage, FireEvent, CancelJob, OwnerState, EpochBumped and
Problem)."""

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
    owner: Optional[str] = None
    """The timer's owner, None for none."""
    epoch: Optional[int] = None
    """The owner's fencing epoch when the timer was scheduled; set
    whenever owner is."""
    labels: Dict[str, str] = field(default_factory=dict)
    deadline: Optional[datetime] = None
    """The latest time its fire may be delivered, None for none."""
    extra: Dict[str, Any] = field(default_factory=dict)
    """Fields the API answered that this version does not know: a newer
    server's, kept rather than refused."""

    @property
    def text(self) -> str:
        """The payload decoded as UTF-8."""
        return self.payload.decode("utf-8")

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Timer":
        known = {"id", "state", "due_at", "created_at", "fired_at", "cancelled_at", "payload", "created", "delivery",
                 "owner", "epoch", "labels", "deadline"}
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
            owner=d.get("owner"),
            epoch=d.get("epoch"),
            labels=dict(d.get("labels") or {}),
            deadline=parse_time(d.get("deadline")),
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
    owner: Optional[str] = None
    """The timer's owner, None for none."""
    epoch: Optional[int] = None
    """The owner's fencing epoch when the timer was scheduled: refuse the
    fire if the owner's epoch is higher now."""
    labels: Dict[str, str] = field(default_factory=dict)
    deadline: Optional[datetime] = None
    extra: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, d: Dict[str, Any], event_id: str = "") -> "FireEvent":
        known = {"id", "due_at", "fired_at", "payload", "shard", "stream_id", "owner", "epoch", "labels", "deadline"}
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
            owner=d.get("owner"),
            epoch=d.get("epoch"),
            labels=dict(d.get("labels") or {}),
            deadline=parse_time(d.get("deadline")),
            extra={k: v for k, v in d.items() if k not in known},
        )


@dataclass(frozen=True)
class CancelJob:
    """A bulk cancel job (the schema CancelJob): its filter, state
    (running, done or failed) and what it found so far."""

    id: str
    filter: Dict[str, Any]
    """The filter as the API took it: id_prefix, owner, labels, epoch_below."""
    state: str
    created_at: datetime
    finished_at: Optional[datetime]
    counts: Dict[str, int]
    """cancelled, fired, already_cancelled, skipped."""
    shards: int
    shards_done: int
    error: str = ""
    """Why a failed job stopped."""
    extra: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "CancelJob":
        known = {"id", "filter", "state", "created_at", "finished_at", "counts", "shards", "shards_done", "error"}
        created = parse_time(d["created_at"])
        assert created is not None
        return cls(
            id=d["id"],
            filter=dict(d["filter"]),
            state=d["state"],
            created_at=created,
            finished_at=parse_time(d.get("finished_at")),
            counts=dict(d["counts"]),
            shards=int(d["shards"]),
            shards_done=int(d["shards_done"]),
            error=d.get("error") or "",
            extra={k: v for k, v in d.items() if k not in known},
        )


@dataclass(frozen=True)
class OwnerState:
    """Where an owner stands (the schema OwnerState): its fencing epoch, how
    many of its timers are scheduled, and the earliest due time among them
    (None when none is)."""

    owner: str
    epoch: int
    scheduled: int
    next_wake_at: Optional[datetime]
    extra: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "OwnerState":
        known = {"owner", "epoch", "scheduled", "next_wake_at"}
        return cls(
            owner=d["owner"],
            epoch=int(d["epoch"]),
            scheduled=int(d["scheduled"]),
            next_wake_at=parse_time(d.get("next_wake_at")),
            extra={k: v for k, v in d.items() if k not in known},
        )


@dataclass(frozen=True)
class EpochBumped:
    """An owner's new epoch (the schema EpochBumped), and the bulk cancel of
    its older timers when cancel_older asked for one."""

    owner: str
    epoch: int
    cancel_job: Optional[CancelJob] = None
    extra: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "EpochBumped":
        job = d.get("cancel_job")
        return cls(
            owner=d["owner"],
            epoch=int(d["epoch"]),
            cancel_job=None if job is None else CancelJob.from_json(job),
            extra={k: v for k, v in d.items() if k not in {"owner", "epoch", "cancel_job"}},
        )


STALE_EPOCH = "urn:timerq:problem:stale-epoch"
"""The problem type of a schedule under an owner epoch that is no longer
the owner's current one."""


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


class StaleEpochError(TimerqError):
    """The TimerqError (409, urn:timerq:problem:stale-epoch) of a schedule
    whose epoch is no longer its owner's: another executor bumped the epoch
    and took the owner over. Nothing was written; stop acting for the owner
    (or bump again to take it back)."""
