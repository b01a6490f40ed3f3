// Package httpstream lets an HTTP server hold requests open (the
// dashboard's live tail today, and the HTTP API's long polls and
// Server-Sent Events) without those requests taking the server down.
//
// A Limiter caps how many are open at once, per client and in total; a
// request beyond either cap is refused at once (the caller answers 503
// with Retry-After and the CapError's text, which names the cap and the
// setting that raises it) rather than queued. A Stream sets the connection's write
// deadline before each write, so the server's WriteTimeout can stay short for ordinary requests and
// still bound every write of a stream, not its whole life, and its Poll is
// the loop of a Server-Sent Events stream that polls its source.
//
// Neither touches Redis. What a held request reads there, it must read
// without holding a connection of a pool that other requests need: the
// dashboard polls the fire streams with non-blocking reads.
package httpstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// DefaultRetryAfter is Limits.RetryAfter when it is 0.
const DefaultRetryAfter = 5 * time.Second

// Limits configures a Limiter.
type Limits struct {
	// What names the held requests in messages, plural: "live tails".
	What string
	// Total caps the requests held at once over all clients; at least 1.
	Total int
	// PerClient caps the requests held at once for one client, by remote
	// IP address (ClientOf); at least 1.
	PerClient int
	// TotalSetting and PerClientSetting name what raises each cap, for
	// the refusal's text: a flag such as "--max-tails", or an option.
	TotalSetting, PerClientSetting string
	// RetryAfter is how long a refused client is told to wait. 0 means
	// DefaultRetryAfter.
	RetryAfter time.Duration
}

// ErrTooMany is wrapped by every CapError: a held request was refused
// because a cap was reached.
var ErrTooMany = errors.New("too many requests held open")

// CapError says which cap refused a request, and how to raise it.
type CapError struct {
	What    string
	Client  string // empty when the total cap refused it
	Limit   int
	Setting string
}

func (e *CapError) Error() string {
	if e.Client != "" {
		return fmt.Sprintf("too many %s from %s: %d are open, the cap per client; close one, or raise %s",
			e.What, e.Client, e.Limit, e.Setting)
	}
	return fmt.Sprintf("too many %s: %d are open over all clients, the total cap; close one, or raise %s",
		e.What, e.Limit, e.Setting)
}

// Unwrap makes errors.Is(err, ErrTooMany) hold.
func (e *CapError) Unwrap() error { return ErrTooMany }

// Limiter counts held requests against Limits. It is safe for concurrent
// use.
type Limiter struct {
	l         Limits
	mu        sync.Mutex
	total     int
	perClient map[string]int
}

// NewLimiter returns a Limiter of l, or an error when a cap is below 1.
func NewLimiter(l Limits) (*Limiter, error) {
	if l.Total < 1 || l.PerClient < 1 {
		return nil, fmt.Errorf("httpstream: caps of %s must be at least 1, not %d in total and %d per client", l.What, l.Total, l.PerClient)
	}
	if l.RetryAfter <= 0 {
		l.RetryAfter = DefaultRetryAfter
	}
	return &Limiter{l: l, perClient: map[string]int{}}, nil
}

// Acquire takes a slot for r's client, or returns a *CapError when the
// client's cap or the total cap is reached. Call release, once, when the
// request ends.
func (l *Limiter) Acquire(r *http.Request) (release func(), err error) {
	client := ClientOf(r)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.perClient[client] >= l.l.PerClient {
		return nil, &CapError{What: l.l.What, Client: client, Limit: l.l.PerClient, Setting: l.l.PerClientSetting}
	}
	if l.total >= l.l.Total {
		return nil, &CapError{What: l.l.What, Limit: l.l.Total, Setting: l.l.TotalSetting}
	}
	l.total++
	l.perClient[client]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.total--
			if l.perClient[client]--; l.perClient[client] == 0 {
				delete(l.perClient, client)
			}
		})
	}, nil
}

// Held returns how many requests hold a slot.
func (l *Limiter) Held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}

// SetRetryAfter sets the Retry-After header of a refusal, in whole
// seconds.
func (l *Limiter) SetRetryAfter(h http.Header) {
	h.Set("Retry-After", strconv.Itoa(int((l.l.RetryAfter+time.Second-1)/time.Second)))
}

// ClientOf is the client a request counts against: its remote IP address.
// Behind a reverse proxy that is the proxy's, so every user shares one
// client's cap.
func ClientOf(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// Stream writes a held response. Create it with Start, before the first
// write.
type Stream struct {
	w            http.ResponseWriter
	rc           *http.ResponseController
	writeTimeout time.Duration
}

// Start begins streaming to w, and returns a Stream whose every Send must
// finish within writeTimeout, so a client that stops reading is cut off.
// A w that cannot flush fails the first Send with http.ErrNotSupported.
//
// The server's ReadTimeout needs no such care: once a request without a
// body is read, net/http clears the connection's read deadline itself.
func Start(w http.ResponseWriter, writeTimeout time.Duration) *Stream {
	return &Stream{w: w, rc: http.NewResponseController(w), writeTimeout: writeTimeout}
}

// Send writes p and flushes it, within the write timeout from now.
func (s *Stream) Send(p []byte) error {
	if err := s.rc.SetWriteDeadline(time.Now().Add(s.writeTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	if _, err := s.w.Write(p); err != nil {
		return err
	}
	return s.rc.Flush()
}

// Poll is what Stream.Poll sends: Server-Sent Events of a source that is
// read without blocking, since a blocking read would hold a connection of
// a pool that other requests need.
type Poll struct {
	// Every is how often Next runs while it finds nothing.
	Every time.Duration
	// KeepAlive is how long nothing may be sent before a comment is, so
	// that a gone client (or a proxy's idle timeout) is noticed this soon.
	KeepAlive time.Duration
	// Backoff is how long to wait after Next failed, so that a failing
	// source is reported every Backoff rather than every Every.
	Backoff time.Duration
	// Next reads what came since its last call and writes it to buf as
	// events; it writes nothing when it fails. full says it read a whole
	// batch, so that it runs again at once.
	Next func(ctx context.Context, buf *bytes.Buffer) (full bool, err error)
	// Problem writes the event that reports Next's error err.
	Problem func(buf *bytes.Buffer, err error)
}

// Poll runs p until ctx ends or a Send fails (the client is gone or
// stopped reading): it calls p.Next, sends what it wrote, a problem or a
// keep-alive comment, and waits.
func (s *Stream) Poll(ctx context.Context, p Poll) {
	tick := time.NewTicker(p.Every)
	defer tick.Stop()
	lastSent := time.Now()
	var buf bytes.Buffer
	for {
		buf.Reset()
		full, err := p.Next(ctx, &buf)
		if ctx.Err() != nil {
			return
		}
		switch {
		case err != nil:
			buf.Reset()
			p.Problem(&buf, err)
		case buf.Len() == 0 && time.Since(lastSent) >= p.KeepAlive:
			buf.WriteString(": keep-alive\n\n")
		}
		if buf.Len() > 0 {
			if s.Send(buf.Bytes()) != nil {
				return
			}
			lastSent = time.Now()
		}
		if full && err == nil {
			continue // more are waiting
		}
		wait := tick.C
		if err != nil {
			wait = time.After(p.Backoff)
		}
		select {
		case <-ctx.Done():
			return
		case <-wait:
		}
	}
}
