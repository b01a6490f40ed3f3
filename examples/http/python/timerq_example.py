#!/usr/bin/env python3
"""timerq's HTTP API from Python's standard library alone (urllib, json).

Schedules a timer, reads it back, lists, cancels one and waits for another
to fire, with a long poll and on the Server-Sent Events stream. It reads:

  TIMERQ_API    the API's base URL, e.g. http://localhost:8080
  TIMERQ_TOKEN  a bearer token with read and write on TIMERQ_NS
  TIMERQ_NS     the namespace (default: default)

    TIMERQ_API=http://localhost:8080 TIMERQ_TOKEN=tq_... python3 timerq_example.py

examples/http's Go test runs it against a real timerworker. It exits 1
with the problem's type and detail when a call fails.
"""

import base64
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request


class Problem(Exception):
    """An RFC 9457 problem answered by the API."""

    def __init__(self, status, body):
        self.status = status
        self.type = body.get("type", "")
        self.detail = body.get("detail", "")
        self.field = body.get("field")
        super().__init__(f"{status} {self.type}: {self.detail}")


class Timerq:
    """A small client for one namespace of timerq's HTTP API."""

    def __init__(self, base, token, ns):
        self.base = base.rstrip("/")
        self.token = token
        self.ns = ns

    def url(self, path, **query):
        u = f"{self.base}/v1/namespaces/{urllib.parse.quote(self.ns, safe='')}{path}"
        q = {k: v for k, v in query.items() if v is not None}
        return u + ("?" + urllib.parse.urlencode(q) if q else "")

    def call(self, method, path, body=None, read_timeout=30, **query):
        """Returns (status, parsed JSON body); raises Problem on an error."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url(path, **query), data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=read_timeout) as resp:
                raw = resp.read()
                return resp.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as e:
            raise Problem(e.code, json.loads(e.read() or b"{}")) from None

    @staticmethod
    def timer_path(id_):
        # One path segment: '/' and spaces percent-encoded.
        return "/timers/" + urllib.parse.quote(id_, safe="")

    def create(self, id_, *, due_at=None, in_=None, text=None):
        body = {"id": id_}
        if due_at is not None:
            body["due_at"] = due_at
        if in_ is not None:
            body["in"] = in_
        if text is not None:
            body["payload_text"] = text
        return self.call("POST", "/timers", body)

    def get(self, id_):
        return self.call("GET", self.timer_path(id_))[1]

    def cancel(self, id_):
        return self.call("POST", self.timer_path(id_) + "/cancel")[1]

    def wait(self, id_, timeout="30s"):
        """Long poll: the timer once it fired or was cancelled, or as it is
        when the timeout passed (state still "scheduled": ask again)."""
        return self.call("GET", self.timer_path(id_) + "/wait", read_timeout=120, timeout=timeout)[1]

    def list(self, state=None, limit=100):
        """Every timer in state, following next_cursor page by page."""
        cursor = None
        while True:
            _, page = self.call("GET", "/timers", state=state, limit=limit, cursor=cursor)
            yield from page["timers"]
            cursor = page["next_cursor"]
            if not cursor:
                return

    def fires(self, last_event_id=None, timeout=30):
        """Opens the SSE stream of the namespace's fires, at once: it
        starts after the newest fire (or after last_event_id)."""
        req = urllib.request.Request(self.url("/fires"))
        req.add_header("Authorization", f"Bearer {self.token}")
        req.add_header("Accept", "text/event-stream")
        if last_event_id:
            req.add_header("Last-Event-ID", last_event_id)
        try:
            return FireStream(urllib.request.urlopen(req, timeout=timeout))
        except urllib.error.HTTPError as e:
            raise Problem(e.code, json.loads(e.read() or b"{}")) from None


class FireStream:
    """Iterates (event id, fire) over an open SSE response; close it."""

    def __init__(self, resp):
        self.resp = resp

    def __iter__(self):
        event, ev_id, data = "message", "", []
        for raw in self.resp:
            line = raw.decode().rstrip("\r\n")
            if line == "":
                if event == "fire":
                    yield ev_id, json.loads("\n".join(data))
                elif event == "problem":
                    raise Problem(0, json.loads("\n".join(data)))
                event, ev_id, data = "message", "", []
            elif line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("id:"):
                ev_id = line[3:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip())

    def close(self):
        self.resp.close()


def payload(timer):
    return base64.b64decode(timer["payload"]).decode()


def main():
    api = Timerq(os.environ.get("TIMERQ_API", "http://localhost:8080"),
                 os.environ.get("TIMERQ_TOKEN", ""), os.environ.get("TIMERQ_NS", "default"))

    status, t = api.create("py/order 7", in_="1h", text="expire order 7")
    again, _ = api.create("py/order 7", in_="2h")
    print(f"created {t['id']!r}: {status} then {again}, due {t['due_at']}")

    try:
        api.create("py-bad", due_at="1893456000")
    except Problem as p:
        print(f"refused: {p.status} {p.type} at {p.field}")

    ids = [t["id"] for t in api.list(state="scheduled", limit=1)]
    print(f"listed {len(ids)} scheduled, one per page: {ids}")

    c = api.cancel("py/order 7")
    print(f"cancelled: state {c['state']}")

    stream = api.fires()
    api.create("py-soon", in_="500ms", text="hello from python")
    w = api.wait("py-soon", timeout="20s")
    print(f"waited: {w['id']} {w['state']}, payload {payload(w)!r}")
    for ev_id, fire in stream:
        if fire["id"] == "py-soon":
            print(f"stream: fire {fire['id']} (shard {fire['shard']}), event id {'set' if ev_id else 'missing'}")
            break
    stream.close()
    print("done")


if __name__ == "__main__":
    try:
        main()
    except Problem as p:
        print(f"timerq: {p}", file=sys.stderr)
        sys.exit(1)
