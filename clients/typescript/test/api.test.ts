// Every route of timerq's HTTP API, through the package's `raw` client:
// openapi-fetch typed by gen/timerq.d.ts, which openapi-typescript
// generated from api/openapi.json (npm run generate), so a route or field
// renamed in the contract fails tsc before this runs. The Go test
// clients/clients_test.go (go test ./clients/) starts Redis and a real
// timerworker and sets:
//   TIMERQ_API    the worker's base URL, e.g. http://127.0.0.1:41234
//   TIMERQ_TOKEN  a bearer token with read, write and admin on TIMERQ_NS
//   TIMERQ_NS     a namespace of this run's own
//   TIMERQ_SHARDS the namespace's shard count (16 on the Cluster arm)
// Without TIMERQ_API every test here skips (the Go test fails on a skip).
import assert from "node:assert/strict";
import { Timerq, type components } from "@timerq/client";
import { liveTest as test, live } from "./live.js";

type FireEvent = components["schemas"]["FireEvent"];

const { base, token, ns, shards } = live;
const client = new Timerq({ baseUrl: base, token, namespace: ns }).raw;
const ns_ = { path: { ns } };

/** text decodes a timer's base64 payload. */
function text(t: { payload: string }): string {
  return Buffer.from(t.payload, "base64").toString("utf8");
}

test("the namespace: PUT with its shard count again is 200, GET has stats", async () => {
  const put = await client.PUT("/v1/namespaces/{ns}", { params: ns_, body: { shards } });
  assert.equal(put.response.status, 200, JSON.stringify(put.error));
  assert.equal(put.data?.created, false);
  assert.equal(put.data?.shards, shards);
  const clash = await client.PUT("/v1/namespaces/{ns}", { params: ns_, body: { shards: shards + 1 } });
  assert.equal(clash.response.status, 409);
  assert.equal(clash.error?.type, "urn:timerq:problem:shard-mismatch");
  const got = await client.GET("/v1/namespaces/{ns}", { params: ns_ });
  assert.equal(got.response.status, 200, JSON.stringify(got.error));
  assert.equal(got.data?.shards, shards);
  assert.ok(got.data?.stats, "stats missing");
});

test("create is idempotent by ID: 201, then 200 with the timer as it was", async () => {
  const body = { id: "order/42 x", in: "1h", payload_text: "expire order 42" };
  const first = await client.POST("/v1/namespaces/{ns}/timers", { params: ns_, body });
  assert.equal(first.response.status, 201, JSON.stringify(first.error));
  assert.equal(first.data?.created, true);
  assert.equal(first.data?.state, "scheduled");
  assert.equal(text(first.data!), "expire order 42");
  const again = await client.POST("/v1/namespaces/{ns}/timers", {
    params: ns_,
    body: { ...body, in: "2h", payload_text: "something else" },
  });
  assert.equal(again.response.status, 200, JSON.stringify(again.error));
  assert.equal(again.data?.created, false);
  assert.equal(again.data?.due_at, first.data?.due_at, "a re-create moved the timer");
  assert.equal(text(again.data!), "expire order 42");

  // An ID with '/' and a space is one path segment, percent-encoded.
  const got = await client.GET("/v1/namespaces/{ns}/timers/{id}", { params: { path: { ns, id: "order/42 x" } } });
  assert.equal(got.response.status, 200, JSON.stringify(got.error));
  assert.equal(got.data?.id, "order/42 x");

  const missing = await client.GET("/v1/namespaces/{ns}/timers/{id}", { params: { path: { ns, id: "no-such" } } });
  assert.equal(missing.response.status, 404);
  assert.equal(missing.error?.type, "urn:timerq:problem:not-found");
});

test("bad input is a problem naming the field, and writes nothing", async () => {
  const res = await fetch(`${base}/v1/namespaces/${ns}/timers`, {
    method: "POST",
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    // "due" is not a field: a typed client cannot even send it.
    body: JSON.stringify({ id: "typo", due: "2030-01-01T00:00:00Z" }),
  });
  assert.equal(res.status, 400);
  assert.match(res.headers.get("content-type") ?? "", /^application\/problem\+json/);
  const p = (await res.json()) as components["schemas"]["Problem"];
  assert.equal(p.type, "urn:timerq:problem:invalid-request");
  assert.match(p.detail ?? "", /due/);
  const got = await client.GET("/v1/namespaces/{ns}/timers/{id}", { params: { path: { ns, id: "typo" } } });
  assert.equal(got.response.status, 404);
});

test("batch: one result per timer, in order; one bad item writes nothing and is named", async () => {
  const ok = await client.POST("/v1/namespaces/{ns}/timers/batch", {
    params: ns_,
    body: {
      timers: [
        { id: "batch-a", due_at: "2030-01-01T00:00:00Z" },
        { id: "batch-b", in: "1h", payload_text: "b" },
        { id: "batch-c", due_at: "1893456000000ms" },
      ],
    },
  });
  assert.equal(ok.response.status, 200, JSON.stringify(ok.error));
  assert.deepEqual(ok.data?.timers.map((t) => [t.id, t.created]), [
    ["batch-a", true],
    ["batch-b", true],
    ["batch-c", true],
  ]);
  assert.equal(ok.data?.timers[0]?.due_at, "2030-01-01T00:00:00.000Z");

  const bad = await client.POST("/v1/namespaces/{ns}/timers/batch", {
    params: ns_,
    body: { timers: [{ id: "batch-d", in: "1h" }, { id: "batch-e", due_at: "1893456000" }] },
  });
  // A bare number is refused (seconds or milliseconds?), and named.
  assert.equal(bad.response.status, 422, JSON.stringify(bad.error));
  assert.equal(bad.error?.type, "urn:timerq:problem:invalid-due");
  assert.equal(bad.error?.field, "/timers/1/due_at");
  const d = await client.GET("/v1/namespaces/{ns}/timers/{id}", { params: { path: { ns, id: "batch-d" } } });
  assert.equal(d.response.status, 404, "a refused batch wrote its good item");
});

test("bulk cancel: every timer of a prefix, and the job read back", async () => {
  const made = await client.POST("/v1/namespaces/{ns}/timers/batch", {
    params: ns_,
    body: { timers: [{ id: "bulk/1", in: "1h" }, { id: "bulk/2", in: "1h" }, { id: "bulky", in: "1h" }] },
  });
  assert.equal(made.response.status, 200, JSON.stringify(made.error));
  const job = await client.POST("/v1/namespaces/{ns}/timers/cancel", { params: ns_, body: { id_prefix: "bulk/" } });
  assert.equal(job.response.status, 200, JSON.stringify(job.error));
  assert.equal(job.data?.state, "done");
  assert.deepEqual(job.data?.counts, { cancelled: 2, fired: 0, already_cancelled: 0, skipped: 0 });
  const id = job.data?.id ?? "";
  const got = await client.GET("/v1/namespaces/{ns}/cancel-jobs/{id}", { params: { path: { ns, id } } });
  assert.equal(got.response.status, 200, JSON.stringify(got.error));
  assert.deepEqual(got.data, job.data);
  const list = await client.GET("/v1/namespaces/{ns}/cancel-jobs", { params: ns_ });
  assert.equal(list.response.status, 200, JSON.stringify(list.error));
  assert.ok(list.data?.cancel_jobs.some((j) => j.id === id), "the job is listed");
  const left = await client.GET("/v1/namespaces/{ns}/timers/{id}", { params: { path: { ns, id: "bulky" } } });
  assert.equal(left.data?.state, "scheduled", "a timer outside the prefix was cancelled");
  const empty = await client.POST("/v1/namespaces/{ns}/timers/cancel", { params: ns_, body: { id_prefix: "" } });
  assert.equal(empty.response.status, 422);
  assert.equal(empty.error?.type, "urn:timerq:problem:invalid-argument");
});

test("owners: timers with an owner and labels, the owner's epoch and next wake, a bump, and a stale epoch refused", async () => {
  const owner = "wf/7 ä";
  const owner_ = { path: { ns, owner } };
  const fresh = await client.GET("/v1/namespaces/{ns}/owners/{owner}", { params: owner_ });
  assert.equal(fresh.response.status, 200, JSON.stringify(fresh.error));
  assert.deepEqual(fresh.data, { owner, epoch: 0, scheduled: 0, next_wake_at: null });
  const made = await client.POST("/v1/namespaces/{ns}/timers/batch", {
    params: ns_,
    body: {
      timers: [
        { id: "own/1", due_at: "2031-02-01T00:00:00Z", owner, labels: { tenant: "acme" }, fire_within_ms: 60000 },
        { id: "own/2", due_at: "2031-02-02T00:00:00Z", owner, labels: { tenant: "other" }, fire_by: "2031-02-03T00:00:00Z" },
      ],
    },
  });
  assert.equal(made.response.status, 200, JSON.stringify(made.error));
  const first = made.data!.timers[0]!;
  assert.equal(first.owner, owner);
  assert.equal(first.epoch, 0);
  assert.deepEqual(first.labels, { tenant: "acme" });
  assert.equal(first.deadline, "2031-02-01T00:01:00.000Z");
  const byLabel = await client.GET("/v1/namespaces/{ns}/timers", { params: { path: { ns }, query: { owner, label: ["tenant=acme"] } } });
  assert.equal(byLabel.response.status, 200, JSON.stringify(byLabel.error));
  assert.deepEqual(byLabel.data?.timers.map((t) => t.id), ["own/1"]);
  const wake = await client.GET("/v1/namespaces/{ns}/owners/{owner}", { params: owner_ });
  assert.equal(wake.data?.scheduled, 2);
  assert.equal(wake.data?.next_wake_at, "2031-02-01T00:00:00.000Z");

  const bumped = await client.POST("/v1/namespaces/{ns}/owners/{owner}/epoch", { params: owner_, body: {} });
  assert.equal(bumped.response.status, 200, JSON.stringify(bumped.error));
  assert.equal(bumped.data?.epoch, 1);
  const stale = await client.POST("/v1/namespaces/{ns}/timers", { params: ns_, body: { id: "own/3", in: "1h", owner, epoch: 7 } });
  assert.equal(stale.response.status, 409);
  assert.equal(stale.error?.type, "urn:timerq:problem:stale-epoch");
  assert.equal(stale.error?.field, "/epoch");
  const again = await client.POST("/v1/namespaces/{ns}/owners/{owner}/epoch", { params: owner_, body: { cancel_older: true } });
  assert.equal(again.response.status, 200, JSON.stringify(again.error));
  assert.equal(again.data?.epoch, 2);
  assert.deepEqual(again.data?.cancel_job?.filter, { owner, epoch_below: 2 });
  assert.equal(again.data?.cancel_job?.counts.cancelled, 2);
  const byOwner = await client.POST("/v1/namespaces/{ns}/timers/cancel", { params: ns_, body: { owner, labels: { tenant: "acme" } } });
  assert.equal(byOwner.response.status, 200, JSON.stringify(byOwner.error));
  assert.deepEqual(byOwner.data?.counts, { cancelled: 0, fired: 0, already_cancelled: 1, skipped: 0 });
});

test("list pages through every shard with the cursor", async () => {
  const ids = Array.from({ length: 7 }, (_, i) => `page-${i}`);
  const made = await client.POST("/v1/namespaces/{ns}/timers/batch", {
    params: ns_,
    body: { timers: ids.map((id, i) => ({ id, due_at: `2031-01-01T00:00:0${i}Z` })) },
  });
  assert.equal(made.response.status, 200, JSON.stringify(made.error));
  const seen: string[] = [];
  let cursor: string | undefined;
  let pages = 0;
  do {
    const page = await client.GET("/v1/namespaces/{ns}/timers", {
      params: {
        path: { ns },
        query: { state: "scheduled", due_from: "2031-01-01T00:00:00Z", due_to: "2031-01-02T00:00:00Z", limit: 3, ...(cursor ? { cursor } : {}) },
      },
    });
    assert.equal(page.response.status, 200, JSON.stringify(page.error));
    assert.ok(page.data!.timers.length <= 3);
    seen.push(...page.data!.timers.map((t) => t.id));
    cursor = page.data!.next_cursor || undefined;
    pages++;
    assert.ok(pages < 20, "the cursor does not end");
  } while (cursor);
  assert.deepEqual(seen, ids, "pages, in due order, hold each timer once");
  assert.ok(pages >= 3);
});

test("reschedule, fire now and cancel, with 409 for a timer that cannot change", async () => {
  const p = (id: string) => ({ params: { path: { ns, id } } });
  await client.POST("/v1/namespaces/{ns}/timers", { params: ns_, body: { id: "move", in: "1h" } });
  const moved = await client.POST("/v1/namespaces/{ns}/timers/{id}/reschedule", { ...p("move"), body: { due_at: "2032-02-03T04:05:06.789Z" } });
  assert.equal(moved.response.status, 200, JSON.stringify(moved.error));
  assert.equal(moved.data?.due_at, "2032-02-03T04:05:06.789Z");

  const cancelled = await client.POST("/v1/namespaces/{ns}/timers/{id}/cancel", p("move"));
  assert.equal(cancelled.response.status, 200, JSON.stringify(cancelled.error));
  assert.equal(cancelled.data?.state, "cancelled");
  assert.ok(cancelled.data?.cancelled_at);
  const again = await client.POST("/v1/namespaces/{ns}/timers/{id}/cancel", p("move"));
  assert.equal(again.response.status, 200, "cancelling twice is no change, not an error");
  const late = await client.POST("/v1/namespaces/{ns}/timers/{id}/reschedule", { ...p("move"), body: { in: "1m" } });
  assert.equal(late.response.status, 409);
  assert.equal(late.error?.type, "urn:timerq:problem:cancelled");

  await client.POST("/v1/namespaces/{ns}/timers", { params: ns_, body: { id: "now", in: "1h" } });
  const fired = await client.POST("/v1/namespaces/{ns}/timers/{id}/fire", p("now"));
  assert.equal(fired.response.status, 200, JSON.stringify(fired.error));
  const w = await client.GET("/v1/namespaces/{ns}/timers/{id}/wait", { params: { path: { ns, id: "now" }, query: { timeout: "20s" } } });
  assert.equal(w.data?.state, "fired", "the worker did not fire a timer made due now");
  const noCancel = await client.POST("/v1/namespaces/{ns}/timers/{id}/cancel", p("now"));
  assert.equal(noCancel.response.status, 409);
  assert.equal(noCancel.error?.type, "urn:timerq:problem:already-fired");
});

test("debounce: created, pushed, capped; a fired window is not re-armed, the next call opens another", async () => {
  const key = "cart/7 x";
  const d = (body: components["schemas"]["Debounce"]) => client.POST("/v1/namespaces/{ns}/debounce/{key}", { params: { path: { ns, key } }, body });
  const first = await d({ delay: "1h", max_wait: "2h", payload_text: "v1" });
  assert.equal(first.response.status, 201, JSON.stringify(first.error));
  assert.equal(first.data?.outcome, "created");
  const id = first.data!.timer.id;
  assert.ok(id.startsWith(key + "@"), `window ID ${id} is not <key>@<ms>`);
  assert.equal(Date.parse(first.data!.deadline_at) - Date.parse(first.data!.now), 2 * 3600_000);

  const pushed = await d({ delay: "1h", max_wait: "2h", payload_text: "v2" });
  assert.equal(pushed.response.status, 200, JSON.stringify(pushed.error));
  assert.equal(pushed.data?.outcome, "pushed");
  assert.equal(pushed.data?.timer.id, id);
  assert.equal(text(pushed.data!.timer), "v2", "the newest payload wins");

  const capped = await d({ delay: "3h", max_wait: "3h", payload_text: "v3", keep_first: true });
  assert.equal(capped.response.status, 200, JSON.stringify(capped.error));
  assert.equal(capped.data?.outcome, "capped");
  assert.equal(capped.data?.timer.due_at, first.data!.deadline_at, "capped at the first call's deadline");
  assert.equal(text(capped.data!.timer), "v2", "keep_first leaves the payload");

  const bad = await d({ delay: "1m", max_wait: "1s" });
  assert.equal(bad.response.status, 422);
  assert.equal(bad.error?.type, "urn:timerq:problem:invalid-argument");

  const p = { params: { path: { ns, id } } };
  await client.POST("/v1/namespaces/{ns}/timers/{id}/fire", p);
  const w = await client.GET("/v1/namespaces/{ns}/timers/{id}/wait", { params: { path: { ns, id }, query: { timeout: "20s" } } });
  assert.equal(w.data?.state, "fired", "the worker did not fire the window made due now");
  const next = await d({ delay: "1h", max_wait: "2h", payload_text: "v4" });
  assert.equal(next.response.status, 201, JSON.stringify(next.error));
  assert.equal(next.data?.outcome, "created");
  assert.notEqual(next.data?.timer.id, id, "a fired window was re-armed");
  assert.ok(next.data!.timer.id.startsWith(key + "@"));
});

test("wait is a long poll: it answers when the timer fires, or scheduled at the timeout", async () => {
  const made = await client.POST("/v1/namespaces/{ns}/timers", { params: ns_, body: { id: "soon", in: "800ms", payload_text: "hello" } });
  assert.equal(made.response.status, 201, JSON.stringify(made.error));
  const w = await client.GET("/v1/namespaces/{ns}/timers/{id}/wait", { params: { path: { ns, id: "soon" }, query: { timeout: "20s" } } });
  assert.equal(w.response.status, 200, JSON.stringify(w.error));
  assert.equal(w.data?.state, "fired");
  assert.ok(Date.parse(w.data!.fired_at!) >= Date.parse(w.data!.due_at), "fired before it was due");
  assert.equal(text(w.data!), "hello");

  // Already fired: at once.
  const t0 = Date.now();
  const again = await client.GET("/v1/namespaces/{ns}/timers/{id}/wait", { params: { path: { ns, id: "soon" }, query: { timeout: "20s" } } });
  assert.equal(again.data?.state, "fired");
  assert.ok(Date.now() - t0 < 10_000, "a wait for a fired timer did not answer at once");

  await client.POST("/v1/namespaces/{ns}/timers", { params: ns_, body: { id: "later", in: "1h" } });
  const timeout = await client.GET("/v1/namespaces/{ns}/timers/{id}/wait", { params: { path: { ns, id: "later" }, query: { timeout: "300ms" } } });
  assert.equal(timeout.response.status, 200, JSON.stringify(timeout.error));
  assert.equal(timeout.data?.state, "scheduled", "the timeout passed: ask again");
});

/** sse reads fire events from a streamFires response until stop says so. */
async function readFires(body: ReadableStream<Uint8Array>, stop: (e: FireEvent, id: string) => boolean): Promise<void> {
  const dec = new TextDecoder();
  let buf = "";
  const reader = body.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) throw new Error("the fire stream ended");
      buf += dec.decode(value, { stream: true });
      let end: number;
      while ((end = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, end);
        buf = buf.slice(end + 2);
        let event = "message";
        let id = "";
        const data: string[] = [];
        for (const line of block.split("\n")) {
          if (line.startsWith("event:")) event = line.slice(6).trim();
          else if (line.startsWith("id:")) id = line.slice(3).trim();
          else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
        }
        if (event === "problem") throw new Error(`the fire stream sent a problem: ${data.join("\n")}`);
        if (event === "fire" && stop(JSON.parse(data.join("\n")) as FireEvent, id)) return;
      }
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
}

async function openFires(headers: Record<string, string>, signal: AbortSignal): Promise<ReadableStream<Uint8Array>> {
  const res = await client.GET("/v1/namespaces/{ns}/fires", { params: ns_, headers, parseAs: "stream", signal });
  assert.equal(res.response.status, 200);
  assert.match(res.response.headers.get("content-type") ?? "", /^text\/event-stream/);
  assert.ok(res.data, "no stream body");
  return res.data as ReadableStream<Uint8Array>;
}

test("SSE: fires arrive as events, and Last-Event-ID resumes after the last one seen", async () => {
  const ac = new AbortController();
  const deadline = setTimeout(() => ac.abort(new Error("no fire event within 30s")), 30_000);
  try {
    // ?after=0 would replay every fire kept; with none the stream starts
    // after the newest, so open it before firing.
    const stream = await openFires({}, ac.signal);
    const names = ["sse-1", "sse-2", "sse-3"];
    const made = await client.POST("/v1/namespaces/{ns}/timers/batch", {
      params: ns_,
      body: { timers: names.map((id) => ({ id, in: "0s", payload_text: id })) },
    });
    assert.equal(made.response.status, 200, JSON.stringify(made.error));
    const got = new Set<string>();
    let lastID = "";
    await readFires(stream, (e, id) => {
      if (names.includes(e.id)) {
        assert.equal(text(e), e.id);
        assert.ok(e.shard >= 0 && e.shard < shards);
        got.add(e.id);
        lastID = id;
      }
      return got.size === names.length;
    });
    assert.ok(lastID, "fire events carry an id");

    // Reconnect from the last event seen: only later fires come.
    const made2 = await client.POST("/v1/namespaces/{ns}/timers", { params: ns_, body: { id: "sse-4", in: "0s" } });
    assert.equal(made2.response.status, 201);
    const resumed = await openFires({ "Last-Event-ID": lastID }, ac.signal);
    await readFires(resumed, (e) => {
      assert.ok(!names.includes(e.id), `resumed stream repeated ${e.id}`);
      return e.id === "sse-4";
    });
  } finally {
    clearTimeout(deadline);
    ac.abort();
  }
});

test("a recurring schedule: create (201, then 200), occurrences fire, pause, resume, update, delete", async () => {
  const sp = (id: string) => ({ params: { path: { ns, id } } });
  const made = await client.POST("/v1/namespaces/{ns}/schedules", {
    params: ns_,
    body: { id: "tick", every: "500ms", payload_text: "tick" },
  });
  assert.equal(made.response.status, 201, JSON.stringify(made.error));
  assert.equal(made.data?.created, true);
  const again = await client.POST("/v1/namespaces/{ns}/schedules", { params: ns_, body: { id: "tick", every: "500ms" } });
  assert.equal(again.response.status, 200, JSON.stringify(again.error));
  assert.equal(again.data?.created, false);

  // Its occurrences are ordinary timers: wait for the first pending one.
  const pending = made.data!.pending[0];
  assert.ok(pending, "a new schedule arms its next occurrence");
  const w = await client.GET("/v1/namespaces/{ns}/timers/{id}/wait", { params: { path: { ns, id: pending.id }, query: { timeout: "20s" } } });
  assert.equal(w.data?.state, "fired", JSON.stringify(w.data ?? w.error));
  assert.equal(text(w.data!), "tick");

  const list = await client.GET("/v1/namespaces/{ns}/schedules", { params: { path: { ns }, query: { limit: 10 } } });
  assert.equal(list.response.status, 200, JSON.stringify(list.error));
  assert.ok(list.data?.schedules.some((s) => s.id === "tick"));

  const paused = await client.POST("/v1/namespaces/{ns}/schedules/{id}/pause", sp("tick"));
  assert.equal(paused.data?.state, "paused", JSON.stringify(paused.error));
  const resumed = await client.POST("/v1/namespaces/{ns}/schedules/{id}/resume", sp("tick"));
  assert.equal(resumed.data?.state, "active", JSON.stringify(resumed.error));
  const updated = await client.PUT("/v1/namespaces/{ns}/schedules/{id}", { ...sp("tick"), body: { cron: "0 3 * * *", tz: "Europe/Berlin" } });
  assert.equal(updated.response.status, 200, JSON.stringify(updated.error));
  assert.equal(updated.data?.cron, "0 3 * * *");
  const got = await client.GET("/v1/namespaces/{ns}/schedules/{id}", sp("tick"));
  assert.equal(got.data?.tz, "Europe/Berlin");
  assert.ok(got.data!.version > made.data!.version);

  const del = await client.DELETE("/v1/namespaces/{ns}/schedules/{id}", sp("tick"));
  assert.equal(del.response.status, 204);
  const gone = await client.GET("/v1/namespaces/{ns}/schedules/{id}", sp("tick"));
  assert.equal(gone.response.status, 404);
  assert.equal(gone.error?.type, "urn:timerq:problem:schedule-not-found");
});

// Pull-consume: a worker in another language leases fire events for its
// consumer group, acknowledges them, hands one back for a retry, and lets
// one run out of attempts into the dead letters, then requeues it.
test("pull-consume: lease, extend, ack, nack (release) with a retry, a dead letter and its requeue", async () => {
  type Delivery = components["schemas"]["Delivery"];
  const group = "billing";
  const rules = { lease: "5s", max_attempts: 2 }; // every request of the group says the same
  const gp = { path: { ns, group } };
  const dp = (delivery: string) => ({ params: { path: { ns, group, delivery } } });
  const ours = ["pc-ack", "pc-nack", "pc-dead"];

  // lease hands out deliveries until want says stop, acknowledging the
  // fires of the other tests in this namespace as it goes.
  async function leaseUntil(want: (got: Delivery[]) => boolean): Promise<Delivery[]> {
    const got: Delivery[] = [];
    const deadline = Date.now() + 30_000;
    while (!want(got)) {
      assert.ok(Date.now() < deadline, `lease: still waiting after 30s; got ${JSON.stringify(got.map((d) => [d.id, d.attempt]))}`);
      const res = await client.POST("/v1/namespaces/{ns}/groups/{group}/lease", {
        params: gp,
        body: { consumer: "ts-1", count: 100, wait: "2s", ...rules },
      });
      assert.equal(res.response.status, 200, JSON.stringify(res.error));
      const others = res.data!.deliveries.filter((d) => !ours.includes(d.id));
      if (others.length > 0) {
        const ack = await client.POST("/v1/namespaces/{ns}/groups/{group}/ack", { params: gp, body: { delivery_ids: others.map((d) => d.delivery_id) } });
        assert.equal(ack.response.status, 200, JSON.stringify(ack.error));
      }
      got.push(...res.data!.deliveries.filter((d) => ours.includes(d.id)));
    }
    return got;
  }
  const one = (got: Delivery[], id: string, attempt: number) => got.find((d) => d.id === id && d.attempt === attempt);

  const made = await client.POST("/v1/namespaces/{ns}/timers/batch", {
    params: ns_,
    body: { timers: ours.map((id) => ({ id, in: "0s", payload_text: id })) },
  });
  assert.equal(made.response.status, 200, JSON.stringify(made.error));

  const first = await leaseUntil((g) => ours.every((id) => one(g, id, 1)));
  const ack1 = one(first, "pc-ack", 1)!;
  assert.equal(text(ack1), "pc-ack");
  assert.ok(Date.parse(ack1.lease_expires_at) > Date.parse(ack1.fired_at));

  const ext = await client.POST("/v1/namespaces/{ns}/groups/{group}/deliveries/{delivery}/extend", { ...dp(ack1.delivery_id), body: { lease_for: "4s", ...rules } });
  assert.equal(ext.response.status, 200, JSON.stringify(ext.error));
  assert.ok(ext.data!.lease_expires_at);
  const acked = await client.POST("/v1/namespaces/{ns}/groups/{group}/ack", { params: gp, body: { delivery_ids: [ack1.delivery_id] } });
  assert.deepEqual(acked.data?.acked, [true], JSON.stringify(acked.error));
  const again = await client.POST("/v1/namespaces/{ns}/groups/{group}/ack", { params: gp, body: { delivery_ids: [ack1.delivery_id] } });
  assert.deepEqual(again.data?.acked, [false], "an ack of a delivery no longer pending");

  // A nack: back after a delay, as attempt 2.
  const nack = await client.POST("/v1/namespaces/{ns}/groups/{group}/deliveries/{delivery}/release", {
    ...dp(one(first, "pc-nack", 1)!.delivery_id),
    body: { delay: "200ms", error: "try later", ...rules },
  });
  assert.equal(nack.response.status, 200, JSON.stringify(nack.error));
  assert.ok(nack.data?.redeliver_at, "a release before the last attempt redelivers");
  // pc-dead fails on each of its max_attempts attempts.
  const fail1 = await client.POST("/v1/namespaces/{ns}/groups/{group}/deliveries/{delivery}/release", {
    ...dp(one(first, "pc-dead", 1)!.delivery_id),
    body: { error: "boom", ...rules },
  });
  assert.ok(fail1.data?.redeliver_at, JSON.stringify(fail1.data ?? fail1.error));

  const second = await leaseUntil((g) => !!one(g, "pc-nack", 2) && !!one(g, "pc-dead", 2));
  const ackN = await client.POST("/v1/namespaces/{ns}/groups/{group}/ack", { params: gp, body: { delivery_ids: [one(second, "pc-nack", 2)!.delivery_id] } });
  assert.deepEqual(ackN.data?.acked, [true]);
  const fail2 = await client.POST("/v1/namespaces/{ns}/groups/{group}/deliveries/{delivery}/release", {
    ...dp(one(second, "pc-dead", 2)!.delivery_id),
    body: { error: "boom", ...rules },
  });
  assert.equal(fail2.response.status, 200, JSON.stringify(fail2.error));
  const deadID = fail2.data?.dead_letter_id;
  assert.ok(deadID, "the last attempt's release dead-letters the event");

  const dead = await client.GET("/v1/namespaces/{ns}/groups/{group}/dead-letters", { params: { path: { ns, group }, query: { limit: 100 } } });
  assert.equal(dead.response.status, 200, JSON.stringify(dead.error));
  const dl = dead.data!.dead_letters.find((d) => d.dead_letter_id === deadID);
  assert.ok(dl, `dead letter ${deadID} not listed: ${JSON.stringify(dead.data)}`);
  assert.equal(dl.id, "pc-dead");
  assert.equal(dl.error, "boom");
  assert.equal(dl.attempts, 2);

  const rq = await client.POST("/v1/namespaces/{ns}/groups/{group}/dead-letters/{dead}/requeue", { params: { path: { ns, group, dead: deadID } } });
  assert.equal(rq.response.status, 200, JSON.stringify(rq.error));
  assert.ok(rq.data?.stream_id);
  const third = await leaseUntil((g) => !!one(g, "pc-dead", 1));
  const ackD = await client.POST("/v1/namespaces/{ns}/groups/{group}/ack", { params: gp, body: { delivery_ids: [one(third, "pc-dead", 1)!.delivery_id] } });
  assert.deepEqual(ackD.data?.acked, [true]);
  const gone = await client.POST("/v1/namespaces/{ns}/groups/{group}/dead-letters/{dead}/requeue", { params: { path: { ns, group, dead: deadID } } });
  assert.equal(gone.response.status, 404, "a requeued dead letter is gone");
});

test("a token is needed; the document is public", async () => {
  const anon = new Timerq({ baseUrl: base, namespace: ns }).raw;
  const denied = await anon.GET("/v1/namespaces/{ns}/timers/{id}", { params: { path: { ns, id: "soon" } } });
  assert.equal(denied.response.status, 401);
  const doc = await anon.GET("/v1/openapi.json");
  assert.equal(doc.response.status, 200);
});

test("endpoints: create, read with secrets redacted, list, disable, enable, deliver to, delete", async () => {
  const name = "billing";
  const ep = { path: { ns, name } };
  const secret = "whsec_" + Buffer.from(Array.from({ length: 32 }, (_, i) => i * 7)).toString("base64");
  const body = { url: "https://example.com/hooks/billing", secrets: [secret], timeout: "5s", retry: { max_attempts: 3 } };
  const put = await client.PUT("/v1/namespaces/{ns}/endpoints/{name}", { params: ep, body });
  assert.equal(put.response.status, 201, JSON.stringify(put.error));
  assert.equal(put.data?.created, true);
  const again = await client.PUT("/v1/namespaces/{ns}/endpoints/{name}", { params: ep, body });
  assert.equal(again.response.status, 200, JSON.stringify(again.error));
  assert.equal(again.data?.created, false);

  const got = await client.GET("/v1/namespaces/{ns}/endpoints/{name}", { params: ep });
  assert.equal(got.response.status, 200, JSON.stringify(got.error));
  assert.equal(got.data?.url, body.url);
  assert.equal(got.data?.retry.max_attempts, 3);
  assert.equal(got.data?.secrets.length, 1);
  const redacted = got.data!.secrets[0] ?? "";
  assert.ok(redacted.startsWith("whsec_") && redacted !== secret, "the secret comes back redacted");

  const list = await client.GET("/v1/namespaces/{ns}/endpoints", { params: ns_ });
  assert.equal(list.response.status, 200, JSON.stringify(list.error));
  assert.ok(list.data?.endpoints.some((e) => e.name === name), JSON.stringify(list.data));

  const off = await client.POST("/v1/namespaces/{ns}/endpoints/{name}/disable", { params: ep });
  assert.equal(off.response.status, 200, JSON.stringify(off.error));
  assert.equal(off.data?.enabled, false);
  const on = await client.POST("/v1/namespaces/{ns}/endpoints/{name}/enable", { params: ep });
  assert.equal(on.response.status, 200, JSON.stringify(on.error));
  assert.equal(on.data?.enabled, true);

  const delivering = await client.POST("/v1/namespaces/{ns}/timers", {
    params: ns_, body: { id: "ep-delivers", in: "1h", payload_text: "invoice 7", deliver: { endpoint: name } },
  });
  assert.equal(delivering.response.status, 201, JSON.stringify(delivering.error));
  const nowhere = await client.POST("/v1/namespaces/{ns}/timers", {
    params: ns_, body: { id: "ep-nowhere", in: "1h", deliver: { endpoint: "no-such-endpoint" } },
  });
  assert.equal(nowhere.response.status, 422);
  assert.equal(nowhere.error?.type, "urn:timerq:problem:unknown-endpoint");

  // A timer URL of its own is a namespace policy, off by default.
  const timerURL = { id: "ep-own-url", in: "1h", deliver: { endpoint: name, url: "https://example.com/hooks/own" } };
  const policy0 = await client.GET("/v1/namespaces/{ns}/delivery-policy", { params: ns_ });
  assert.equal(policy0.response.status, 200, JSON.stringify(policy0.error));
  assert.equal(policy0.data?.allow_timer_urls, false);
  const refused = await client.POST("/v1/namespaces/{ns}/timers", { params: ns_, body: timerURL });
  assert.equal(refused.response.status, 422);
  assert.equal(refused.error?.type, "urn:timerq:problem:timer-urls-off");
  assert.equal(refused.error?.field, "/deliver/url");
  const allow = await client.PUT("/v1/namespaces/{ns}/delivery-policy", { params: ns_, body: { allow_timer_urls: true } });
  assert.equal(allow.response.status, 200, JSON.stringify(allow.error));
  assert.equal(allow.data?.allow_timer_urls, true);
  const own = await client.POST("/v1/namespaces/{ns}/timers", { params: ns_, body: timerURL });
  assert.equal(own.response.status, 201, JSON.stringify(own.error));
  const deny = await client.PUT("/v1/namespaces/{ns}/delivery-policy", { params: ns_, body: { allow_timer_urls: false } });
  assert.equal(deny.response.status, 200, JSON.stringify(deny.error));

  const del = await client.DELETE("/v1/namespaces/{ns}/endpoints/{name}", { params: ep });
  assert.equal(del.response.status, 204, JSON.stringify(del.error));
  const gone = await client.GET("/v1/namespaces/{ns}/endpoints/{name}", { params: ep });
  assert.equal(gone.response.status, 404);
  assert.equal(gone.error?.type, "urn:timerq:problem:endpoint-not-found");
});

test("flow control: a policy refused, put, listed and deleted; a timer with a flow key; a group's flows", async () => {
  const key = "ts-tenant";
  const bad = await client.PUT("/v1/namespaces/{ns}/flow-policies", { params: ns_, body: { key, rate: 0, period: "1s" } });
  assert.equal(bad.response.status, 422, JSON.stringify(bad.error));
  assert.equal(bad.error?.type, "urn:timerq:problem:invalid-argument");
  const put = await client.PUT("/v1/namespaces/{ns}/flow-policies", { params: ns_, body: { key, rate: 5, period: "1s", max_in_flight: 2 } });
  assert.equal(put.response.status, 200, JSON.stringify(put.error));
  assert.deepEqual(put.data, { key, rate: 5, period: "1s", max_in_flight: 2 });
  const list = await client.GET("/v1/namespaces/{ns}/flow-policies", { params: ns_ });
  assert.equal(list.response.status, 200, JSON.stringify(list.error));
  assert.ok(list.data?.flow_policies.some((p) => p.key === key && p.rate === 5), JSON.stringify(list.data));

  const made = await client.POST("/v1/namespaces/{ns}/timers", { params: ns_, body: { id: "flow-later", in: "1h", flow_key: key } });
  assert.equal(made.response.status, 201, JSON.stringify(made.error));
  const flows = await client.GET("/v1/namespaces/{ns}/groups/{group}/flows", { params: { path: { ns, group: "ts-flows" }, query: { limit: 10 } } });
  assert.equal(flows.response.status, 200, JSON.stringify(flows.error));
  assert.deepEqual(flows.data?.flows, [], "nothing parked: the timer has not fired");

  const del = await client.DELETE("/v1/namespaces/{ns}/flow-policies", { params: { path: { ns }, query: { key } } });
  assert.equal(del.response.status, 204, JSON.stringify(del.error));
  const again = await client.DELETE("/v1/namespaces/{ns}/flow-policies", { params: { path: { ns }, query: { key } } });
  assert.equal(again.response.status, 404);
});

test("quotas: the defaults, raised by the admin, and the usage in the namespace's GET", async () => {
  const q0 = await client.GET("/v1/namespaces/{ns}/quotas", { params: ns_ });
  assert.equal(q0.response.status, 200, JSON.stringify(q0.error));
  assert.deepEqual(q0.data, { pending: 1000000, endpoints: 100, schedules: 10000 });
  // A quota left out of the body takes its default.
  const set = await client.PUT("/v1/namespaces/{ns}/quotas", { params: ns_, body: { pending: 2000000 } });
  assert.equal(set.response.status, 200, JSON.stringify(set.error));
  assert.deepEqual(set.data, { pending: 2000000, endpoints: 100, schedules: 10000 });
  const got = await client.GET("/v1/namespaces/{ns}", { params: ns_ });
  assert.equal(got.response.status, 200, JSON.stringify(got.error));
  assert.equal(got.data?.quotas?.pending.limit, 2000000);
  assert.ok((got.data?.quotas?.pending.usage ?? -1) >= 0);
  const back = await client.PUT("/v1/namespaces/{ns}/quotas", { params: ns_, body: {} });
  assert.equal(back.response.status, 200, JSON.stringify(back.error));
});
