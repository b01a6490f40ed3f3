package queue_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// lossyProxy forwards TCP connections to a Redis server until a request
// containing trap passes: it forwards that request, lets Redis run it, and
// then, instead of relaying the reply, drops every connection and stops
// listening, as a master that crashes right after a write does. go-redis's
// retries then find the address refusing connections.
type lossyProxy struct {
	ln     net.Listener
	target string
	trap   []byte

	mu     sync.Mutex
	armed  bool
	sprung chan struct{}
	conns  []net.Conn
	wg     sync.WaitGroup
}

func startLossyProxy(t *testing.T, target string) *lossyProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &lossyProxy{ln: ln, target: target, sprung: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *lossyProxy) addr() string { return p.ln.Addr().String() }

// arm makes the next request containing trap the one whose reply is lost.
func (p *lossyProxy) arm(trap string) {
	p.mu.Lock()
	p.trap, p.armed = []byte(trap), true
	p.mu.Unlock()
}

func (p *lossyProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Add(2)
		trapped := make(chan struct{})
		go func() { // client to server, watching for the trap
			defer p.wg.Done()
			buf := make([]byte, 64<<10)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					p.mu.Lock()
					hit := p.armed && bytes.Contains(buf[:n], p.trap)
					if hit {
						p.armed = false
					}
					p.mu.Unlock()
					if _, werr := s.Write(buf[:n]); werr != nil {
						return
					}
					if hit {
						close(trapped)
					}
				}
				if err != nil {
					s.Close()
					return
				}
			}
		}()
		go func() { // server to client, dropping the trapped reply
			defer p.wg.Done()
			buf := make([]byte, 64<<10)
			for {
				n, err := s.Read(buf)
				select {
				case <-trapped:
					// Redis ran the trapped request and replied: lose
					// the reply, every connection and the listener, as
					// a crashed server would.
					p.ln.Close()
					p.mu.Lock()
					for _, x := range p.conns {
						x.Close()
					}
					p.mu.Unlock()
					close(p.sprung)
					return
				default:
				}
				if n > 0 {
					if _, werr := c.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					c.Close()
					return
				}
			}
		}()
	}
}

func (p *lossyProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// TestScheduleLostReplyIsOutcomeUnknown: a Schedule whose script ran in
// Redis but whose reply was lost, after which go-redis's retry could not
// reconnect ("connection refused", the error issue 20 saw), returns an
// error that errors.Is marks ErrOutcomeUnknown and that says to retry
// with the same ID; the timer was written, and the retry reports it with
// Created false. An error Redis replied with (OOM) is not marked.
func TestScheduleLostReplyIsOutcomeUnknown(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{})
	proxy := startLossyProxy(t, srv.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: proxy.addr(), ReadTimeout: 2 * time.Second})
	t.Cleanup(func() {
		rdb.Close()
		redistest.AwaitRedials(t) // of the proxy's closed address
	})
	ns := redistest.Namespace(t)
	q, err := queue.New(rdb, queue.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Loads the script and reads the layout through the proxy first, so
	// that the trapped request is the schedule itself.
	if _, err := q.ScheduleIn(ctx, "warm-up", time.Hour, nil); err != nil {
		t.Fatal(err)
	}
	proxy.arm("lost-reply-timer")
	_, err = q.ScheduleIn(ctx, "lost-reply-timer", time.Hour, []byte("p"))
	select {
	case <-proxy.sprung:
	default:
		t.Fatalf("the proxy's trap did not spring; Schedule returned %v", err)
	}
	if !errors.Is(err, queue.ErrOutcomeUnknown) {
		t.Fatalf("Schedule after a lost reply = %v, want ErrOutcomeUnknown", err)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "timerq: outcome unknown: retry with the same ID (safe: scheduling is idempotent): ") ||
		strings.Count(msg, "timerq: ") != 1 {
		t.Errorf("error text %q", msg)
	}
	t.Logf("error: %v", err)

	direct, err := queue.New(srv.Client(t), queue.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	res, err := direct.ScheduleIn(ctx, "lost-reply-timer", time.Hour, []byte("p"))
	if err != nil || res.Created {
		t.Fatalf("retry with the same ID: created %v, err %v; want the timer the lost call wrote", res.Created, err)
	}

	// A refusal Redis replied with changed nothing, and says so.
	if err := srv.Client(t).ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	_, err = direct.ScheduleIn(ctx, "refused", time.Hour, nil)
	if !errors.Is(err, queue.ErrOutOfMemory) || errors.Is(err, queue.ErrOutcomeUnknown) {
		t.Fatalf("Schedule refused with OOM = %v, want ErrOutOfMemory and not ErrOutcomeUnknown", err)
	}
}

// TestScheduleBatchLostReplyIsOutcomeUnknown: the same for ScheduleBatch
// over a 4-shard namespace, whose calls go out in one pipeline: the
// pipeline ran, its replies were lost, and the batch's error is
// ErrOutcomeUnknown; the same batch again creates nothing.
func TestScheduleBatchLostReplyIsOutcomeUnknown(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{})
	proxy := startLossyProxy(t, srv.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: proxy.addr(), ReadTimeout: 2 * time.Second})
	t.Cleanup(func() {
		rdb.Close()
		redistest.AwaitRedials(t) // of the proxy's closed address
	})
	ctx := context.Background()
	ns := redistest.Namespace(t)
	if _, err := queue.CreateNamespace(ctx, srv.Client(t), ns, 4); err != nil {
		t.Fatal(err)
	}
	q, err := queue.New(rdb, queue.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	batch := func(prefix string) []queue.NewTimer {
		var out []queue.NewTimer
		for i := range 8 {
			out = append(out, queue.NewTimerIn(fmt.Sprint(prefix, i), time.Hour, nil))
		}
		return out
	}
	if _, err := q.ScheduleBatch(ctx, batch("warm-up-")); err != nil {
		t.Fatal(err)
	}
	proxy.arm("batch-lost-3")
	_, err = q.ScheduleBatch(ctx, batch("batch-lost-"))
	select {
	case <-proxy.sprung:
	default:
		t.Fatalf("the proxy's trap did not spring; ScheduleBatch returned %v", err)
	}
	if !errors.Is(err, queue.ErrOutcomeUnknown) {
		t.Fatalf("ScheduleBatch after a lost reply = %v, want ErrOutcomeUnknown", err)
	}
	direct, err := queue.New(srv.Client(t), queue.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	res, err := direct.ScheduleBatch(ctx, batch("batch-lost-"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Created {
			t.Errorf("retry of the batch created %s, which the lost call had written", r.Timer.ID)
		}
	}
}
