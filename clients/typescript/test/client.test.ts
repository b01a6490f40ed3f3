// The package's own surface (schedule, get, cancel, reschedule, fire,
// wait, list, owners and epochs, bulk cancel, TimerqError) against a real
// timerworker; see live.ts.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { StaleEpochError, Timerq, TimerqError, payloadText, version, type Timer } from "@timerq/client";
import { liveTest, live } from "./live.js";

const tq = new Timerq({ baseUrl: live.base + "/", token: live.token, namespace: live.ns });

/** refused runs a call that must fail and returns its TimerqError. */
async function refused(call: Promise<unknown>): Promise<TimerqError> {
  try {
    await call;
  } catch (e) {
    assert.ok(e instanceof TimerqError, `not a TimerqError: ${String(e)}`);
    return e;
  }
  assert.fail("the call succeeded");
}

test("version is package.json's", () => {
  const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string };
  assert.equal(version, pkg.version);
});

liveTest("schedule is idempotent by ID; get reads it back; a missing timer is a 404 TimerqError", async () => {
  const first = await tq.schedule({ id: "c/schedule 1", in: "1h", payload_text: "one" });
  assert.equal(first.created, true);
  assert.equal(first.state, "scheduled");
  assert.equal(payloadText(first), "one");
  const again = await tq.schedule({ id: "c/schedule 1", in: "2h", payload_text: "two" });
  assert.equal(again.created, false);
  assert.equal(again.due_at, first.due_at, "a re-create moved the timer");
  const got = await tq.get("c/schedule 1");
  assert.equal(got.id, "c/schedule 1");
  assert.equal(payloadText(got), "one");

  const missing = await refused(tq.get("c/no-such"));
  assert.equal(missing.status, 404);
  assert.equal(missing.type, "urn:timerq:problem:not-found");
});

liveTest("a refused field is named by the error", async () => {
  const e = await refused(tq.schedule({ id: "c/bad", due_at: "1893456000" }));
  assert.equal(e.status, 422);
  assert.equal(e.type, "urn:timerq:problem:invalid-due");
  assert.equal(e.field, "/due_at");
  assert.match(e.message, /invalid-due/);
  const batch = await refused(tq.scheduleBatch([{ id: "c/batch-ok", in: "1h" }, { id: "c/batch-bad", due_at: "x" }]));
  assert.equal(batch.field, "/timers/1/due_at");
  assert.equal((await refused(tq.get("c/batch-ok"))).status, 404, "a refused batch wrote its good item");
});

liveTest("scheduleBatch, then list follows the cursor through every page in due order", async () => {
  const ids = Array.from({ length: 5 }, (_, i) => `c/list-${i}`);
  const made = await tq.scheduleBatch(ids.map((id, i) => ({ id, due_at: `2033-01-01T00:00:0${i}Z` })));
  assert.deepEqual(made.map((t) => [t.id, t.created]), ids.map((id) => [id, true]));
  const seen: string[] = [];
  for await (const t of tq.list({ state: "scheduled", due_from: "2033-01-01T00:00:00Z", due_to: "2033-01-02T00:00:00Z", limit: 2 })) {
    seen.push(t.id);
  }
  assert.deepEqual(seen, ids);
  const page = await tq.listPage({ due_from: "2033-01-01T00:00:00Z", due_to: "2033-01-02T00:00:00Z", limit: 2 });
  assert.equal(page.timers.length, 2);
  assert.ok(page.next_cursor, "a first page of 2 of 5 has a cursor");
});

liveTest("reschedule, cancel, and a 409 for a timer that cannot change", async () => {
  await tq.schedule({ id: "c/move", in: "1h" });
  const moved = await tq.reschedule("c/move", { due_at: "2034-05-06T07:08:09.123Z" });
  assert.equal(moved.due_at, "2034-05-06T07:08:09.123Z");
  const cancelled = await tq.cancel("c/move");
  assert.equal(cancelled.state, "cancelled");
  assert.ok(cancelled.cancelled_at);
  assert.equal((await tq.cancel("c/move")).state, "cancelled", "cancelling twice is no change");
  const late = await refused(tq.reschedule("c/move", { in: "1m" }));
  assert.equal(late.status, 409);
  assert.equal(late.type, "urn:timerq:problem:cancelled");
});

liveTest("fire makes a timer due now and wait answers when it fired; a wait that times out answers it scheduled", async () => {
  await tq.schedule({ id: "c/now", in: "1h", payload_text: "fire me" });
  await tq.fire("c/now");
  let t: Timer = await tq.wait("c/now", { timeout: "20s" });
  assert.equal(t.state, "fired", "the worker did not fire a timer made due now");
  assert.ok(t.fired_at);
  assert.equal(payloadText(t), "fire me");
  const noCancel = await refused(tq.cancel("c/now"));
  assert.equal(noCancel.type, "urn:timerq:problem:already-fired");

  await tq.schedule({ id: "c/later", in: "1h" });
  t = await tq.wait("c/later", { timeout: "200ms" });
  assert.equal(t.state, "scheduled", "the timeout passed: ask again");
});

liveTest("a wrong token is a 401 TimerqError", async () => {
  const anon = new Timerq({ baseUrl: live.base, token: "tq_wrong", namespace: live.ns });
  const e = await refused(anon.get("c/anything"));
  assert.equal(e.status, 401);
});

liveTest("owners: labelled timers listed by owner and label, the owner read, a bump fences a stale schedule, cancel by owner", async () => {
  const owner = "c/wf 1";
  const fresh = await tq.getOwner(owner);
  assert.deepEqual(fresh, { owner, epoch: 0, scheduled: 0, next_wake_at: null });
  const made = await tq.scheduleBatch([
    { id: "c/own-a", due_at: "2037-03-01T00:00:00Z", owner, labels: { step: "pay", tenant: "acme" }, fire_within_ms: 30000 },
    { id: "c/own-b", due_at: "2037-03-02T00:00:00Z", owner, labels: { step: "ship", tenant: "acme" } },
  ]);
  assert.deepEqual(made.map((t) => [t.owner, t.epoch]), [[owner, 0], [owner, 0]]);
  assert.deepEqual(made[0]!.labels, { step: "pay", tenant: "acme" });
  assert.equal(made[0]!.deadline, "2037-03-01T00:00:30.000Z");
  await tq.schedule({ id: "c/own-other", due_at: "2037-03-01T00:00:00Z", owner: "c/wf 2", labels: { tenant: "acme" } });

  const mine: string[] = [];
  for await (const t of tq.list({ owner, limit: 1 })) mine.push(t.id);
  assert.deepEqual(mine, ["c/own-a", "c/own-b"], "list by owner");
  const ship: string[] = [];
  for await (const t of tq.list({ label: ["tenant=acme", "step=ship"] })) ship.push(t.id);
  assert.deepEqual(ship, ["c/own-b"], "list by labels, all of which must match");

  const state = await tq.getOwner(owner);
  assert.equal(state.scheduled, 2);
  assert.equal(state.next_wake_at, "2037-03-01T00:00:00.000Z");

  const bumped = await tq.bumpEpoch(owner);
  assert.equal(bumped.epoch, 1);
  assert.equal(bumped.cancel_job, undefined, "a bump without cancelOlder cancelled");
  const current = await tq.schedule({ id: "c/own-c", due_at: "2037-03-03T00:00:00Z", owner, epoch: bumped.epoch });
  assert.equal(current.epoch, 1);
  assert.equal((await tq.getOwner(owner)).epoch, 1);

  const job = await tq.cancelMatching({ owner, labels: { tenant: "acme" } });
  assert.equal(job.state, "done");
  assert.deepEqual(job.filter, { owner, labels: { tenant: "acme" } });
  assert.deepEqual(job.counts, { cancelled: 2, fired: 0, already_cancelled: 0, skipped: 0 });
  assert.deepEqual(await tq.cancelJob(job.id), job);
  assert.equal((await tq.get("c/own-other")).state, "scheduled", "another owner's timer was cancelled");
  assert.equal((await tq.get("c/own-c")).state, "scheduled", "a timer without the label was cancelled");
  const after = await tq.getOwner(owner);
  assert.equal(after.scheduled, 1);
  assert.equal(after.next_wake_at, "2037-03-03T00:00:00.000Z");

  const older = await tq.bumpEpoch(owner, { cancelOlder: true });
  assert.equal(older.epoch, 2);
  assert.deepEqual(older.cancel_job?.filter, { owner, epoch_below: 2 });
  assert.equal(older.cancel_job?.counts.cancelled, 1);
  assert.deepEqual(await tq.getOwner(owner), { owner, epoch: 2, scheduled: 0, next_wake_at: null });

  // The executor of epoch 1 was taken over: its schedule is refused, typed.
  const stale = await refused(tq.schedule({ id: "c/own-stale", in: "1h", owner, epoch: bumped.epoch }));
  assert.ok(stale instanceof StaleEpochError, `not a StaleEpochError: ${stale.name}`);
  assert.equal(stale.status, 409);
  assert.equal(stale.type, "urn:timerq:problem:stale-epoch");
  assert.equal(stale.field, "/epoch");
  const missing = await refused(tq.get("c/own-stale"));
  assert.equal(missing.status, 404, "a stale schedule wrote its timer");
  assert.ok(!(missing instanceof StaleEpochError), "a 404 is a StaleEpochError");
});

liveTest("a fire carries the epoch its timer was scheduled under", async () => {
  const owner = "c/wf fire";
  await tq.schedule({ id: "c/own-fire-0", in: "1h", owner, payload_text: "old" });
  const { epoch } = await tq.bumpEpoch(owner);
  await tq.schedule({ id: "c/own-fire-1", in: "1h", owner, epoch, payload_text: "new" });
  for (const id of ["c/own-fire-0", "c/own-fire-1"]) await tq.fire(id);
  const old = await tq.wait("c/own-fire-0", { timeout: "20s" });
  const cur = await tq.wait("c/own-fire-1", { timeout: "20s" });
  assert.deepEqual([old.state, old.owner, old.epoch], ["fired", owner, 0], "the fire before the bump");
  assert.deepEqual([cur.state, cur.owner, cur.epoch], ["fired", owner, epoch], "the fire after the bump");
  assert.ok(old.epoch! < epoch, "an executor at the bumped epoch could not tell the old fire apart");
});
