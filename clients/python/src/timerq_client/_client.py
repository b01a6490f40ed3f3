"""Client: one namespace of timerq's HTTP API, over urllib."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Dict, Iterator, List, Optional, Union

from .types import STALE_EPOCH, CancelJob, EpochBumped, FireEvent, OwnerState, StaleEpochError, Timer, TimerPage, TimerqError

When = Union[str, datetime]
"""A due time: a datetime (an aware one; a naive one is taken as UTC), or
the API's text: RFC 3339 with an offset, or Unix time with its unit
("1796238000s", "1796238000000ms")."""


def _when(v: When) -> str:
    if isinstance(v, datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=timezone.utc)
        return v.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return v


@dataclass(frozen=True)
class NewTimer:
    """A timer to create (the schema NewTimer): give due_at or in_ (a delay
    in Go's syntax, "90s", "1h30m", from the Redis server's clock), and
    payload (bytes) or payload_text."""

    id: str
    due_at: Optional[When] = None
    in_: Optional[str] = None
    payload: Optional[bytes] = None
    payload_text: Optional[str] = None
    deliver: Optional[Dict[str, str]] = None
    """{"endpoint": name} (and "url" where the namespace allows it)."""
    flow_key: Optional[str] = None
    owner: Optional[str] = None
    """Who owns the timer (a workflow's ID, say)."""
    labels: Optional[Dict[str, str]] = None
    epoch: Optional[int] = None
    """With owner: the owner epoch the caller acts under; a stale one is
    refused with 409 stale-epoch."""
    fire_within_ms: Optional[int] = None
    """How long after its due time the fire may still be delivered."""
    fire_by: Optional[When] = None
    """fire_within_ms as a point in time; give one of them."""

    def to_json(self) -> Dict[str, Any]:
        body: Dict[str, Any] = {"id": self.id}
        if self.due_at is not None:
            body["due_at"] = _when(self.due_at)
        if self.in_ is not None:
            body["in"] = self.in_
        if self.payload is not None:
            body["payload"] = base64.b64encode(self.payload).decode()
        if self.payload_text is not None:
            body["payload_text"] = self.payload_text
        if self.deliver is not None:
            body["deliver"] = self.deliver
        if self.flow_key is not None:
            body["flow_key"] = self.flow_key
        if self.owner is not None:
            body["owner"] = self.owner
        if self.labels is not None:
            body["labels"] = self.labels
        if self.epoch is not None:
            body["epoch"] = self.epoch
        if self.fire_within_ms is not None:
            body["fire_within_ms"] = self.fire_within_ms
        if self.fire_by is not None:
            body["fire_by"] = _when(self.fire_by)
        return body


class Client:
    """A client for one namespace of timerq's HTTP API.

    Every method raises TimerqError for an answer that is not a success,
    and urllib's URLError when the API cannot be reached. call() reaches
    the routes this class has no method for (schedules, endpoints, pull
    consumers, flow policies, quotas; docs/api.md).

    Owners, labels and the fencing epoch are fields of NewTimer, Timer and
    FireEvent; list filters by owner and labels, cancel_matching cancels by
    owner or labels, get_owner reads an owner and bump_epoch fences it. A
    schedule under a stale epoch raises StaleEpochError.
    """

    def __init__(self, base_url: str, namespace: str, token: Optional[str] = None, timeout: float = 30.0):
        """base_url: the API's, e.g. http://localhost:8080 (timerworker
        --api-addr); token: a bearer token (timerctl api-token create),
        None for a loopback API without a tokens file; timeout: seconds
        for a call to answer (wait adds its own long poll)."""
        self.base_url = base_url.rstrip("/")
        self.namespace = namespace
        self.token = token
        self.timeout = timeout

    def url(self, path: str, **query: Any) -> str:
        """The URL of a path under the namespace, with the query parameters
        that are not None."""
        u = f"{self.base_url}/v1/namespaces/{urllib.parse.quote(self.namespace, safe='')}{path}"
        q = {k: v for k, v in query.items() if v is not None}
        # doseq: a list is the parameter repeated (label=a=1&label=b=2).
        return u + ("?" + urllib.parse.urlencode(q, doseq=True) if q else "")

    def _request(self, method: str, url: str, body: Any = None) -> urllib.request.Request:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method)
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        return req

    def call(self, method: str, path: str, body: Any = None, *, read_timeout: Optional[float] = None, **query: Any) -> Any:
        """Sends one request to a path under the namespace ("/timers",
        "/schedules/nightly", ...) and returns the JSON it answered (None
        for an empty body); raises TimerqError with the problem answered."""
        req = self._request(method, self.url(path, **query), body)
        try:
            with urllib.request.urlopen(req, timeout=read_timeout or self.timeout) as resp:
                raw = resp.read()
                return json.loads(raw) if raw else None
        except urllib.error.HTTPError as e:
            raise _problem(e) from None

    @staticmethod
    def _timer(id_: str) -> str:
        # One path segment: '/' and spaces percent-encoded.
        return "/timers/" + urllib.parse.quote(id_, safe="")

    def schedule(self, id_: str, *, due_at: Optional[When] = None, in_: Optional[str] = None,
                 payload: Optional[bytes] = None, payload_text: Optional[str] = None,
                 deliver: Optional[Dict[str, str]] = None, flow_key: Optional[str] = None,
                 owner: Optional[str] = None, labels: Optional[Dict[str, str]] = None, epoch: Optional[int] = None,
                 fire_within_ms: Optional[int] = None, fire_by: Optional[When] = None) -> Timer:
        """Creates a timer, or returns the one with its ID as it is: create
        is idempotent by ID, and the result's created says which. With
        owner and epoch, a stale epoch raises StaleEpochError and writes
        nothing (NewTimer describes the fields)."""
        t = NewTimer(id_, due_at=due_at, in_=in_, payload=payload, payload_text=payload_text, deliver=deliver, flow_key=flow_key,
                     owner=owner, labels=labels, epoch=epoch, fire_within_ms=fire_within_ms, fire_by=fire_by)
        return Timer.from_json(self.call("POST", "/timers", t.to_json()))

    def schedule_batch(self, timers: List[NewTimer]) -> List[Timer]:
        """Creates the timers in one call: all of them, or none if one is
        refused (the error's field names it: /timers/<i>/...)."""
        res = self.call("POST", "/timers/batch", {"timers": [t.to_json() for t in timers]})
        return [Timer.from_json(t) for t in res["timers"]]

    def get(self, id_: str) -> Timer:
        """The timer; a missing one raises TimerqError with status 404."""
        return Timer.from_json(self.call("GET", self._timer(id_)))

    def cancel(self, id_: str) -> Timer:
        """Cancels a scheduled timer. Cancelling twice is no change; a fired
        timer raises TimerqError 409 (urn:timerq:problem:already-fired)."""
        return Timer.from_json(self.call("POST", self._timer(id_) + "/cancel"))

    def reschedule(self, id_: str, *, due_at: Optional[When] = None, in_: Optional[str] = None) -> Timer:
        """Moves a scheduled timer to due_at, or to in_ from now."""
        body: Dict[str, Any] = {}
        if due_at is not None:
            body["due_at"] = _when(due_at)
        if in_ is not None:
            body["in"] = in_
        return Timer.from_json(self.call("POST", self._timer(id_) + "/reschedule", body))

    def fire(self, id_: str) -> Timer:
        """Makes a scheduled timer due now; a worker fires it."""
        return Timer.from_json(self.call("POST", self._timer(id_) + "/fire"))

    def wait(self, id_: str, timeout: str = "30s") -> Timer:
        """A long poll: the timer once it fired or was cancelled, or as it
        is when timeout (Go's syntax) passed, still "scheduled": ask again."""
        return Timer.from_json(self.call("GET", self._timer(id_) + "/wait", read_timeout=self.timeout + _seconds(timeout), timeout=timeout))

    def list_page(self, *, state: Optional[str] = None, due_from: Optional[When] = None, due_to: Optional[When] = None,
                  owner: Optional[str] = None, labels: Optional[Dict[str, str]] = None,
                  limit: Optional[int] = None, cursor: Optional[str] = None) -> TimerPage:
        """One page of timers in due order; pass its next_cursor as cursor
        for the next. owner and labels (every one must match) filter the
        page: it may then hold fewer than limit, even none, and still have
        a next_cursor."""
        d = self.call("GET", "/timers", state=state, due_from=None if due_from is None else _when(due_from),
                      due_to=None if due_to is None else _when(due_to), owner=owner,
                      label=[f"{k}={v}" for k, v in labels.items()] if labels else None, limit=limit, cursor=cursor)
        return TimerPage.from_json(d)

    def list(self, *, state: Optional[str] = None, due_from: Optional[When] = None, due_to: Optional[When] = None,
             owner: Optional[str] = None, labels: Optional[Dict[str, str]] = None,
             limit: Optional[int] = None) -> Iterator[Timer]:
        """Every timer that matches, in due order, page by page."""
        cursor: Optional[str] = None
        while True:
            page = self.list_page(state=state, due_from=due_from, due_to=due_to, owner=owner, labels=labels,
                                  limit=limit, cursor=cursor)
            yield from page.timers
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def cancel_matching(self, *, id_prefix: Optional[str] = None, owner: Optional[str] = None,
                        labels: Optional[Dict[str, str]] = None, epoch_below: Optional[int] = None) -> CancelJob:
        """Cancels every scheduled timer the filter selects (an ID prefix,
        an owner, labels: each one given must match; epoch_below, with
        owner, only its timers of older epochs), on every shard. The job
        is done when it fitted in the call, or running in the workers:
        follow it with cancel_job(job.id)."""
        body: Dict[str, Any] = {}
        if id_prefix is not None:
            body["id_prefix"] = id_prefix
        if owner is not None:
            body["owner"] = owner
        if labels is not None:
            body["labels"] = labels
        if epoch_below is not None:
            body["epoch_below"] = epoch_below
        return CancelJob.from_json(self.call("POST", "/timers/cancel", body))

    def cancel_job(self, id_: str) -> CancelJob:
        """A bulk cancel job by its ID: its state and counts so far."""
        return CancelJob.from_json(self.call("GET", "/cancel-jobs/" + urllib.parse.quote(id_, safe="")))

    @staticmethod
    def _owner(owner: str) -> str:
        # One path segment, like a timer ID.
        return "/owners/" + urllib.parse.quote(owner, safe="")

    def get_owner(self, owner: str) -> OwnerState:
        """An owner's fencing epoch, how many of its timers are scheduled,
        and the earliest due time among them (next_wake_at, None when none
        is). An owner nothing named has epoch 0 and none scheduled."""
        return OwnerState.from_json(self.call("GET", self._owner(owner)))

    def bump_epoch(self, owner: str, *, cancel_older: bool = False) -> EpochBumped:
        """Raises an owner's fencing epoch by one and returns it: the
        executor taking the owner over schedules with epoch set to it, and
        ignores fires whose epoch is lower. cancel_older also cancels the
        owner's scheduled timers of older epochs, as a bulk cancel
        (cancel_job)."""
        body = {"cancel_older": True} if cancel_older else {}
        return EpochBumped.from_json(self.call("POST", self._owner(owner) + "/epoch", body))

    def fires(self, last_event_id: Optional[str] = None, timeout: Optional[float] = None) -> "FireStream":
        """Opens the namespace's stream of fires (Server-Sent Events). It
        starts after the newest fire, or after last_event_id; iterate it
        for FireEvents, and close it."""
        req = self._request("GET", self.url("/fires"))
        req.add_header("Accept", "text/event-stream")
        if last_event_id:
            req.add_header("Last-Event-ID", last_event_id)
        try:
            return FireStream(urllib.request.urlopen(req, timeout=timeout or self.timeout))
        except urllib.error.HTTPError as e:
            raise _problem(e) from None


class FireStream:
    """The fires of an open SSE stream: iterate it for FireEvents (each
    with the event_id to resume after); close it, or use it in a with."""

    def __init__(self, resp: Any):
        self._resp = resp

    def __iter__(self) -> Iterator[FireEvent]:
        event, ev_id, data = "message", "", []  # type: str, str, List[str]
        for raw in self._resp:
            line = raw.decode("utf-8").rstrip("\r\n")
            if line == "":
                if event == "fire" and data:
                    yield FireEvent.from_json(json.loads("\n".join(data)), ev_id)
                elif event == "problem":
                    p = json.loads("\n".join(data))
                    raise TimerqError(int(p.get("status") or 0), p)
                event, ev_id, data = "message", "", []
            elif line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("id:"):
                ev_id = line[3:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip())

    def close(self) -> None:
        self._resp.close()

    def __enter__(self) -> "FireStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _problem(e: urllib.error.HTTPError) -> TimerqError:
    raw = e.read() or b""
    try:
        p = json.loads(raw)
        if isinstance(p, dict) and isinstance(p.get("type"), str):
            return (StaleEpochError if p["type"] == STALE_EPOCH else TimerqError)(e.code, p)
    except ValueError:
        pass
    # Not a problem (a proxy's 502, say): one made up from the status.
    p = {"type": "about:blank", "title": e.reason or f"HTTP {e.code}", "status": e.code}
    if raw:
        p["detail"] = raw[:512].decode("utf-8", "replace")
    return TimerqError(e.code, p)


def _seconds(go: str) -> float:
    """Seconds of a Go duration like 30s, 1m30s, 500ms (an upper bound for
    a read timeout; unknown units count as a minute)."""
    total, num = 0.0, ""
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
    i = 0
    while i < len(go):
        c = go[i]
        if c.isdigit() or c == ".":
            num += c
            i += 1
            continue
        unit = go[i:i + 2] if go[i:i + 2] in units else c
        total += float(num or 0) * units.get(unit, 60.0)
        num = ""
        i += len(unit)
    return total
