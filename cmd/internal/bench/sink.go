package bench

// The webhook sink of steady --deliver: an endpoint in this process that
// every timer is delivered to.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/timerq/timerq/deliver"
	"github.com/timerq/timerq/queue"
)

// sinkEndpoint is the name of the endpoint that points at the sink.
const sinkEndpoint = "timerbench-sink"

// sinkAllow is the address range the sink listens in: the endpoint is put
// with it allowed, and the workers' SSRF guard is given it
// (--deliver-allow), as loopback is refused by default.
const sinkAllow = "127.0.0.1/32"

// Delivered is what the sink received for a run's timers. Every timer is
// delivered at least once, so a second request for one is counted, not
// refused.
type Delivered struct {
	// Deliveries is how many of the run's timers arrived at least once.
	Deliveries int `json:"deliveries"`
	// DeliveryLatenessP50 and P99 are each timer's first arrival minus its
	// due time, in server milliseconds (arrivals converted to the server's
	// clock with the bench's measured offset).
	DeliveryLatenessP50 float64 `json:"delivery_lateness_p50_ms"`
	DeliveryLatenessP99 float64 `json:"delivery_lateness_p99_ms"`
	DeliveryLatenessMax float64 `json:"delivery_lateness_max_ms"`
	// DeliveryDuplicates counts requests beyond a timer's first.
	DeliveryDuplicates int `json:"delivery_duplicates"`
	// DeliveryLost counts timers scheduled but not received by the end of
	// the drain.
	DeliveryLost int `json:"delivery_lost"`
}

// sink is an HTTP server on loopback that answers every request 204 and
// records its arrival time by the timerq-timer-id header. It checks no
// signature: it measures what delivery costs, not what a receiver does.
type sink struct {
	srv  *http.Server
	url  string
	done chan struct{}
	n    atomic.Int64 // requests received
	mu   sync.Mutex
	at   map[string][]time.Time
}

// startSink listens on a free loopback port and serves until close.
func startSink() (*sink, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench: webhook sink: %w", err)
	}
	s := &sink{url: "http://" + l.Addr().String() + "/hook", done: make(chan struct{}), at: make(map[string][]time.Time)}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(l) // ErrServerClosed once close is called
	}()
	return s, nil
}

func (s *sink) serve(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	id := r.Header.Get(deliver.HeaderTimerID) // the bench's IDs need no percent-decoding
	s.mu.Lock()
	s.at[id] = append(s.at[id], at)
	s.mu.Unlock()
	s.n.Add(1)
	w.WriteHeader(http.StatusNoContent)
}

// close stops the server, dropping open keep-alive connections.
func (s *sink) close() {
	_ = s.srv.Close()
	<-s.done
}

// putEndpoint puts the sink's endpoint in q's namespace.
func (s *sink) putEndpoint(ctx context.Context, q *queue.Queue) error {
	secret := queue.Secret(deliver.GenerateSecret())
	_, err := q.Endpoints().Put(ctx, queue.Endpoint{Name: sinkEndpoint, URL: s.url, Secrets: []queue.Secret{secret}},
		&queue.PutEndpointOptions{Allow: []netip.Prefix{netip.MustParsePrefix(sinkAllow)}})
	if err != nil {
		return fmt.Errorf("bench: putting the sink's endpoint: %w", err)
	}
	return nil
}

// await waits up to d for n requests, and returns nil whether or not they
// came: what did not is counted as lost.
func (s *sink) await(ctx context.Context, n int, d time.Duration) error {
	err := waitUntil(ctx, d, 20*time.Millisecond, func() (bool, error) { return s.n.Load() >= int64(n), nil })
	if errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}

// result compares what arrived with the n timers of a run; dueOf gives a
// timer's due time and toServerMs converts a local instant to server ms.
func (s *sink) result(run uint32, n int, dueOf func(i int) time.Time, toServerMs func(time.Time) float64) *Delivered {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := &Delivered{}
	late := make([]float64, 0, n)
	for i := range n {
		at := s.at[timerID(run, i)]
		if len(at) == 0 {
			d.DeliveryLost++
			continue
		}
		d.Deliveries++
		d.DeliveryDuplicates += len(at) - 1
		// From the due time to the microsecond, as the wake latency is.
		late = append(late, toServerMs(slices.MinFunc(at, time.Time.Compare))-float64(dueOf(i).UnixMicro())/1000)
	}
	slices.Sort(late)
	d.DeliveryLatenessP50, d.DeliveryLatenessP99 = round3(pct(late, 0.5)), round3(pct(late, 0.99))
	d.DeliveryLatenessMax = round3(pct(late, 1))
	return d
}
