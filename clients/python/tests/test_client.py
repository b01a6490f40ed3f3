"""Client against a real timerworker. go test ./clients/ starts Redis and
the worker and sets TIMERQ_API (its base URL), TIMERQ_TOKEN (read, write
and admin on TIMERQ_NS), TIMERQ_NS (a namespace of the run's own) and
TIMERQ_SHARDS; without TIMERQ_API these tests skip."""

import os
import unittest
from datetime import datetime, timezone

from timerq_client import Client, NewTimer, OwnerState, StaleEpochError, TimerqError

API = os.environ.get("TIMERQ_API", "")


@unittest.skipUnless(API, "TIMERQ_API is not set: run these through go test ./clients/, which starts Redis and a timerworker")
class Live(unittest.TestCase):
    def setUp(self):
        self.c = Client(API, os.environ["TIMERQ_NS"], token=os.environ.get("TIMERQ_TOKEN"))

    def refused(self, call, *args, **kw) -> TimerqError:
        with self.assertRaises(TimerqError) as cm:
            call(*args, **kw)
        return cm.exception

    def test_schedule_is_idempotent_and_get_reads_it(self):
        first = self.c.schedule("py/order 7", in_="1h", payload_text="expire order 7")
        self.assertTrue(first.created)
        self.assertEqual(first.state, "scheduled")
        self.assertEqual(first.text, "expire order 7")
        self.assertEqual(first.due_at.tzinfo, timezone.utc)
        again = self.c.schedule("py/order 7", in_="2h", payload=b"other")
        self.assertFalse(again.created)
        self.assertEqual(again.due_at, first.due_at, "a re-create moved the timer")
        got = self.c.get("py/order 7")
        self.assertEqual((got.id, got.payload), ("py/order 7", b"expire order 7"))
        self.assertEqual(got.extra, {}, "the API answered fields this package does not know")
        missing = self.refused(self.c.get, "py/no-such")
        self.assertEqual((missing.status, missing.type), (404, "urn:timerq:problem:not-found"))

    def test_a_refused_field_is_named(self):
        e = self.refused(self.c.schedule, "py-bad", due_at="1893456000")
        self.assertEqual((e.status, e.type, e.field), (422, "urn:timerq:problem:invalid-due", "/due_at"))
        e = self.refused(self.c.schedule_batch, [NewTimer("py-batch-ok", in_="1h"), NewTimer("py-batch-bad", due_at="x")])
        self.assertEqual(e.field, "/timers/1/due_at")
        self.assertEqual(self.refused(self.c.get, "py-batch-ok").status, 404, "a refused batch wrote its good item")

    def test_batch_and_list_follow_the_cursor(self):
        ids = [f"py-list-{i}" for i in range(5)]
        made = self.c.schedule_batch([NewTimer(id_, due_at=datetime(2035, 1, 1, 0, 0, i, tzinfo=timezone.utc)) for i, id_ in enumerate(ids)])
        self.assertEqual([(t.id, t.created) for t in made], [(i, True) for i in ids])
        window = dict(due_from="2035-01-01T00:00:00Z", due_to=datetime(2035, 1, 2, tzinfo=timezone.utc))
        self.assertEqual([t.id for t in self.c.list(state="scheduled", limit=2, **window)], ids)
        page = self.c.list_page(limit=2, **window)
        self.assertEqual(len(page.timers), 2)
        self.assertTrue(page.next_cursor)

    def test_reschedule_cancel_and_conflicts(self):
        self.c.schedule("py-move", in_="1h")
        moved = self.c.reschedule("py-move", due_at="2036-02-03T04:05:06.789Z")
        self.assertEqual(moved.due_at, datetime(2036, 2, 3, 4, 5, 6, 789000, tzinfo=timezone.utc))
        cancelled = self.c.cancel("py-move")
        self.assertEqual(cancelled.state, "cancelled")
        self.assertIsNotNone(cancelled.cancelled_at)
        self.assertEqual(self.c.cancel("py-move").state, "cancelled", "cancelling twice is no change")
        late = self.refused(self.c.reschedule, "py-move", in_="1m")
        self.assertEqual((late.status, late.type), (409, "urn:timerq:problem:cancelled"))

    def test_fire_wait_and_the_stream(self):
        with self.c.fires() as stream:
            self.c.schedule("py-soon", in_="1h", payload_text="hello from python")
            self.c.fire("py-soon")
            w = self.c.wait("py-soon", timeout="20s")
            self.assertEqual(w.state, "fired", "the worker did not fire a timer made due now")
            self.assertGreaterEqual(w.fired_at, w.due_at)
            self.assertEqual(w.text, "hello from python")
            for ev in stream:
                if ev.id == "py-soon":
                    self.assertEqual(ev.payload, b"hello from python")
                    self.assertTrue(ev.event_id, "no SSE event id to resume after")
                    break
        e = self.refused(self.c.cancel, "py-soon")
        self.assertEqual(e.type, "urn:timerq:problem:already-fired")
        self.c.schedule("py-later", in_="1h")
        self.assertEqual(self.c.wait("py-later", timeout="200ms").state, "scheduled", "the timeout passed: ask again")

    def test_call_reaches_other_routes_and_a_bad_token_is_401(self):
        ns = self.c.call("GET", "")
        self.assertEqual(ns["shards"], int(os.environ.get("TIMERQ_SHARDS", "1")))
        anon = Client(API, self.c.namespace, token="tq_wrong")
        self.assertEqual(self.refused(anon.get, "py/order 7").status, 401)

    def test_owners_labels_epochs_and_cancel_by_owner(self):
        owner = "py/wf 1"
        self.assertEqual(self.c.get_owner(owner), OwnerState(owner, 0, 0, None))
        made = self.c.schedule_batch([
            NewTimer("py-own-a", due_at="2037-03-01T00:00:00Z", owner=owner, labels={"step": "pay", "tenant": "acme"}, fire_within_ms=30000),
            NewTimer("py-own-b", due_at="2037-03-02T00:00:00Z", owner=owner, labels={"step": "ship", "tenant": "acme"}),
        ])
        self.assertEqual([(t.owner, t.epoch) for t in made], [(owner, 0), (owner, 0)])
        self.assertEqual(made[0].labels, {"step": "pay", "tenant": "acme"})
        self.assertEqual(made[0].deadline, datetime(2037, 3, 1, 0, 0, 30, tzinfo=timezone.utc))
        self.assertEqual(made[0].extra, {}, "the API answered fields this package does not know")
        self.c.schedule("py-own-other", due_at="2037-03-01T00:00:00Z", owner="py/wf 2", labels={"tenant": "acme"})

        self.assertEqual([t.id for t in self.c.list(owner=owner, limit=1)], ["py-own-a", "py-own-b"], "list by owner")
        self.assertEqual([t.id for t in self.c.list(labels={"tenant": "acme", "step": "ship"})], ["py-own-b"],
                         "list by labels, all of which must match")
        state = self.c.get_owner(owner)
        self.assertEqual((state.scheduled, state.next_wake_at), (2, datetime(2037, 3, 1, tzinfo=timezone.utc)))

        bumped = self.c.bump_epoch(owner)
        self.assertEqual((bumped.owner, bumped.epoch, bumped.cancel_job), (owner, 1, None))
        self.assertEqual(self.c.schedule("py-own-c", due_at="2037-03-03T00:00:00Z", owner=owner, epoch=bumped.epoch).epoch, 1)

        job = self.c.cancel_matching(owner=owner, labels={"tenant": "acme"})
        self.assertEqual((job.state, job.filter), ("done", {"owner": owner, "labels": {"tenant": "acme"}}))
        self.assertEqual(job.counts, {"cancelled": 2, "fired": 0, "already_cancelled": 0, "skipped": 0})
        self.assertEqual(self.c.cancel_job(job.id), job)
        self.assertEqual(self.c.get("py-own-other").state, "scheduled", "another owner's timer was cancelled")
        self.assertEqual(self.c.get("py-own-c").state, "scheduled", "a timer without the label was cancelled")
        state = self.c.get_owner(owner)
        self.assertEqual((state.scheduled, state.next_wake_at), (1, datetime(2037, 3, 3, tzinfo=timezone.utc)))

        older = self.c.bump_epoch(owner, cancel_older=True)
        self.assertEqual(older.epoch, 2)
        self.assertIsNotNone(older.cancel_job)
        self.assertEqual(older.cancel_job.filter, {"owner": owner, "epoch_below": 2})
        self.assertEqual(older.cancel_job.counts["cancelled"], 1)
        self.assertEqual(self.c.get_owner(owner), OwnerState(owner, 2, 0, None))

        # The executor of epoch 1 was taken over: its schedule is refused, typed.
        with self.assertRaises(StaleEpochError) as cm:
            self.c.schedule("py-own-stale", in_="1h", owner=owner, epoch=bumped.epoch)
        e = cm.exception
        self.assertEqual((e.status, e.type, e.field), (409, "urn:timerq:problem:stale-epoch", "/epoch"))
        missing = self.refused(self.c.get, "py-own-stale")
        self.assertEqual(missing.status, 404, "a stale schedule wrote its timer")
        self.assertNotIsInstance(missing, StaleEpochError)

    def test_a_fire_carries_its_epoch(self):
        owner = "py/wf fire"
        with self.c.fires() as stream:
            self.c.schedule("py-own-fire-0", in_="1h", owner=owner, payload_text="old")
            epoch = self.c.bump_epoch(owner).epoch
            self.c.schedule("py-own-fire-1", in_="1h", owner=owner, epoch=epoch, payload_text="new")
            for id_ in ("py-own-fire-0", "py-own-fire-1"):
                self.c.fire(id_)
            old, cur = self.c.wait("py-own-fire-0", timeout="20s"), self.c.wait("py-own-fire-1", timeout="20s")
            self.assertEqual((old.state, old.owner, old.epoch), ("fired", owner, 0), "the fire before the bump")
            self.assertEqual((cur.state, cur.owner, cur.epoch), ("fired", owner, epoch), "the fire after the bump")
            seen = {}
            for ev in stream:
                if ev.owner == owner:
                    seen[ev.id] = ev.epoch
                if len(seen) == 2:
                    break
            self.assertEqual(seen, {"py-own-fire-0": 0, "py-own-fire-1": epoch}, "the stream's fires carry their epochs")


if __name__ == "__main__":
    unittest.main()
