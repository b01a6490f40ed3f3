package queue_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// Redrive requeues the delivery group's dead letters to one endpoint, or
// to every one, and leaves those of other groups and those of fires with
// no endpoint; a dry run requeues nothing, and a second redrive finds
// nothing left.
func TestRedrive(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		secret := queue.Secret(queue.SecretPrefix + strings.Repeat("QUFB", 8))
		for _, name := range []string{"a", "b"} {
			if _, err := q.Endpoints().Put(ctx, queue.Endpoint{Name: name, URL: "https://" + name + ".example.com/", Secrets: []queue.Secret{secret}}, nil); err != nil {
				t.Fatal(err)
			}
		}
		past := time.Now().Add(-time.Second)
		if _, err := q.ScheduleBatch(ctx, []queue.NewTimer{{ID: "a1", Due: past, Endpoint: "a"}, {ID: "a2", Due: past, Endpoint: "a"},
			{ID: "b1", Due: past, Endpoint: "b"}, {ID: "plain", Due: past}}); err != nil {
			t.Fatal(err)
		}
		if got := claimAll(t, q); len(got) != 4 {
			t.Fatalf("claimed %d, want 4", len(got))
		}
		o := queue.LeaseOptions{Lease: time.Minute}
		deadLetter := func(group string, ids ...string) {
			t.Helper()
			for _, d := range lease(t, q, group, "c", queue.LeaseOptions{Lease: time.Minute, Count: 10}) {
				dead := slices.Contains(ids, d.Event.ID)
				if _, err := q.Release(ctx, group, d.DeliveryID, queue.ReleaseOptions{DeadLetter: dead, Error: "gone"}, o); err != nil {
					t.Fatal(err)
				}
			}
		}
		deadLetter(queue.DefaultDeliveryGroup, "a1", "a2", "b1", "plain")
		deadLetter("other", "a1")

		ids := func(rs []queue.Redriven) []string {
			var out []string
			for _, r := range rs {
				out = append(out, r.Event.ID)
			}
			slices.Sort(out)
			return out
		}
		dry, err := q.Deliveries().Redrive(ctx, "", &queue.RedriveOptions{DryRun: true})
		if err != nil || !slices.Equal(ids(dry), []string{"a1", "a2", "b1"}) || dry[0].NewStreamID != "" {
			t.Fatalf("dry run = %+v, %v; want a1, a2 and b1, none requeued", dry, err)
		}
		if n, err := q.Deliveries().DeadLetterCount(ctx); err != nil || n != 5 {
			t.Fatalf("after the dry run: %d dead letters, %v; want 5", n, err)
		}
		got, err := q.Deliveries().Redrive(ctx, queue.DefaultDeliveryGroup, &queue.RedriveOptions{Endpoint: "a"})
		if err != nil || !slices.Equal(ids(got), []string{"a1", "a2"}) || got[0].NewStreamID == "" || got[0].Group != queue.DefaultDeliveryGroup {
			t.Fatalf("Redrive(a) = %+v, %v; want a1 and a2 requeued", got, err)
		}
		if again, err := q.Deliveries().Redrive(ctx, "", &queue.RedriveOptions{Endpoint: "a"}); err != nil || len(again) != 0 {
			t.Fatalf("a second Redrive(a) = %+v, %v; want nothing", again, err)
		}
		if rest, err := q.Deliveries().Redrive(ctx, "", nil); err != nil || !slices.Equal(ids(rest), []string{"b1"}) {
			t.Fatalf("Redrive(every endpoint) = %+v, %v; want b1", rest, err)
		}
		dls, err := q.Deliveries().DeadLetters(ctx, queue.DeadLetterListOptions{Limit: 10})
		if err != nil || len(dls.DeadLetters) != 2 {
			t.Fatalf("dead letters left: %+v, %v; want plain's and group other's", dls.DeadLetters, err)
		}
		// The requeued ones come back to the delivery group alone, as
		// first attempts.
		back := lease(t, q, queue.DefaultDeliveryGroup, "c", queue.LeaseOptions{Lease: time.Minute, Count: 10})
		if len(back) != 3 || back[0].Event.Attempt != 1 {
			t.Fatalf("leased after the redrive: %+v; want a1, a2 and b1 at attempt 1", back)
		}

		if _, err := q.Deliveries().Redrive(ctx, "bad group!", nil); !errors.Is(err, queue.ErrInvalidOptions) {
			t.Errorf("Redrive(bad group) = %v; want ErrInvalidOptions", err)
		}
		if _, err := q.Deliveries().Redrive(ctx, "", &queue.RedriveOptions{Endpoint: "bad name!"}); !errors.Is(err, queue.ErrInvalidEndpoint) {
			t.Errorf("Redrive(bad endpoint) = %v; want ErrInvalidEndpoint", err)
		}
	})
}
