// Reminders is a small HTTP service on timerq. It keeps no state but Redis,
// so any number of replicas can serve it:
//
//	POST /reminders       {"id": "optional", "in": "90s", "text": "stand up"}
//	                      or {"at": "2030-01-02T09:00:00Z", ...} in place of "in"
//	GET  /reminders/{id}
//
// A due reminder is delivered as a log line by a consumer of the fire
// stream (queue.Consume); the consumer group shares deliveries among the
// replicas. POST is idempotent by ID: repeating it returns the existing
// reminder (200) rather than adding one, or 409 if the text differs.
//
// With no -addr it runs a self-test and exits: it posts a reminder to
// itself, sees it fire and reads it back. With -addr it serves:
//
//	go run ./examples/reminders                   # self-test
//	go run ./examples/reminders -addr :8080       # serve (in-memory Redis, own poller)
//	TIMERQ_REDIS_URL=redis://127.0.0.1:6379/0 go run ./examples/reminders -addr :8080
//	    # with timerworker --redis redis://127.0.0.1:6379/0 --namespace reminders
//	curl -si -d '{"in":"5s","text":"tea is ready"}' localhost:8080/reminders
//	curl -s localhost:8080/reminders/ID
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/timerq/timerq/examples/internal/exredis"
	"github.com/timerq/timerq/poller"
	"github.com/timerq/timerq/queue"
)

func main() {
	addr := flag.String("addr", "", "address to serve on, e.g. :8080 (empty: run the self-test and exit)")
	delay := flag.Duration("delay", 2*time.Second, "self-test: how far ahead the reminder is due")
	inProcess := flag.Bool("poller", false, "fire timers from this process instead of timerworker (always on with the in-memory Redis)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *addr, *delay, *inProcess); err != nil {
		log.Fatal("reminders: ", err)
	}
}

func run(ctx context.Context, addr string, delay time.Duration, inProcess bool) error {
	logger := slog.New(slog.NewTextHandler(os.Stdout, nil))
	r, err := exredis.Connect()
	if err != nil {
		return err
	}
	defer r.Close()
	logger.Info("using " + r.Describe())

	q, err := queue.New(r.Client, queue.Options{Namespace: "reminders"})
	if err != nil {
		return err
	}
	defer q.Close()
	if r.InMemory || inProcess {
		stopPoller, err := exredis.StartPoller(q, r.Client, poller.Hooks{})
		if err != nil {
			return err
		}
		defer stopPoller()
	}
	svc := &service{q: q, log: logger}

	selfTesting := addr == ""
	// The self-test learns of deliveries through this channel.
	delivered := make(chan string)
	deliver := func(ctx context.Context, ev queue.Event) error {
		svc.deliver(ev)
		if selfTesting {
			select {
			case delivered <- ev.ID:
			case <-ctx.Done():
			}
		}
		return nil
	}
	cctx, stopConsumer := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopConsumer(); wg.Wait() }()
	host, _ := os.Hostname()
	wg.Go(func() {
		_ = q.Consume(cctx, "reminders", "reminders-"+host, deliver, queue.ConsumeOptions{
			OnError: func(err error) { logger.Warn("consume", "err", err) },
		})
	})

	if selfTesting {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: svc.routes(), ReadHeaderTimeout: 5 * time.Second}
	wg.Go(func() { _ = srv.Serve(ln) })
	defer srv.Close()
	base := "http://" + ln.Addr().String()
	logger.Info("listening on " + base)

	if selfTesting {
		return selfTest(ctx, base, delay, delivered)
	}
	<-ctx.Done()
	logger.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

// service holds no state of its own: every request reads or writes Redis.
type service struct {
	q   *queue.Queue
	log *slog.Logger
}

func (s *service) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /reminders", s.create)
	mux.HandleFunc("GET /reminders/{id}", s.get)
	return mux
}

// createRequest is the body of POST /reminders: "in" (a Go duration such
// as "90s") or "at" (RFC 3339), not both.
type createRequest struct {
	ID   string `json:"id"`
	In   string `json:"in"`
	At   string `json:"at"`
	Text string `json:"text"`
}

// reminder is how the API shows a reminder.
type reminder struct {
	ID      string      `json:"id"`
	Text    string      `json:"text"`
	State   queue.State `json:"state"`
	Due     time.Time   `json:"due"`
	FiredAt *time.Time  `json:"fired_at,omitempty"`
}

func toReminder(t queue.Timer) reminder {
	r := reminder{ID: t.ID, Text: string(t.Payload), State: t.State, Due: t.Due}
	if !t.FiredAt.IsZero() {
		r.FiredAt = &t.FiredAt
	}
	return r
}

func (s *service) create(w http.ResponseWriter, req *http.Request) {
	var body createRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, req.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, "body: "+err.Error())
		return
	}
	var due time.Time
	switch {
	case body.In != "" && body.At != "":
		writeError(w, http.StatusBadRequest, `give "in" or "at", not both`)
		return
	case body.In != "":
		d, err := time.ParseDuration(body.In)
		if err != nil || d < 0 {
			writeError(w, http.StatusBadRequest, `"in" must be a non-negative duration such as "90s" or "1h30m"`)
			return
		}
		due = time.Now().Add(d)
	case body.At != "":
		t, err := time.Parse(time.RFC3339Nano, body.At)
		if err != nil {
			writeError(w, http.StatusBadRequest, `"at" must be an RFC 3339 time such as "2030-01-02T09:00:00Z"`)
			return
		}
		due = t
	default:
		writeError(w, http.StatusBadRequest, `give "in" (a duration) or "at" (an RFC 3339 time)`)
		return
	}
	if body.ID == "" {
		body.ID = rand.Text()
	}

	res, err := s.q.Schedule(req.Context(), body.ID, due, []byte(body.Text))
	switch {
	case errors.Is(err, queue.ErrInvalidID), errors.Is(err, queue.ErrInvalidDue), errors.Is(err, queue.ErrPayloadTooLarge):
		writeError(w, http.StatusBadRequest, err.Error())
		return
	case err != nil:
		s.log.Error("schedule", "id", body.ID, "err", err)
		writeError(w, http.StatusInternalServerError, "cannot reach the timer store")
		return
	}
	w.Header().Set("Location", "/reminders/"+body.ID)
	switch {
	case res.Created:
		writeJSON(w, http.StatusCreated, toReminder(res.Timer))
	case string(res.Timer.Payload) == body.Text:
		// A retried POST: same ID, same reminder. Its time is the first one's.
		writeJSON(w, http.StatusOK, toReminder(res.Timer))
	default:
		writeError(w, http.StatusConflict, fmt.Sprintf("reminder %q exists with another text", body.ID))
	}
}

func (s *service) get(w http.ResponseWriter, req *http.Request) {
	t, err := s.q.Get(req.Context(), req.PathValue("id"))
	switch {
	case errors.Is(err, queue.ErrNotFound):
		writeError(w, http.StatusNotFound, "no such reminder (or it fired longer ago than the retention)")
	case errors.Is(err, queue.ErrInvalidID):
		writeError(w, http.StatusBadRequest, err.Error())
	case err != nil:
		s.log.Error("get", "err", err)
		writeError(w, http.StatusInternalServerError, "cannot reach the timer store")
	default:
		writeJSON(w, http.StatusOK, toReminder(t))
	}
}

// deliver is where a real service would send the notification. Delivery
// is at least once, so such a service would deduplicate by ev.ID; a log
// line is harmless to repeat.
func (s *service) deliver(ev queue.Event) {
	s.log.Info("REMINDER", "id", ev.ID, "text", string(ev.Payload), "late", ev.FiredAt.Sub(ev.Due))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// selfTest uses the service as a client would: it posts a reminder, reads
// it back, waits for its delivery and reads it again.
func selfTest(ctx context.Context, base string, delay time.Duration, delivered <-chan string) error {
	body, _ := json.Marshal(createRequest{In: delay.String(), Text: "stretch your legs"})
	var created reminder
	if err := call(ctx, http.MethodPost, base+"/reminders", body, http.StatusCreated, &created); err != nil {
		return err
	}
	fmt.Printf("self-test: POST /reminders: created %s, due %s\n", created.ID, created.Due.Format(time.RFC3339Nano))
	var got reminder
	if err := call(ctx, http.MethodGet, base+"/reminders/"+created.ID, nil, http.StatusOK, &got); err != nil {
		return err
	}
	fmt.Printf("self-test: GET /reminders/%s: %s\n", got.ID, got.State)

	// A retried POST (same ID) finds the reminder rather than adding one.
	body, _ = json.Marshal(createRequest{ID: created.ID, In: "1h", Text: created.Text})
	var again reminder
	if err := call(ctx, http.MethodPost, base+"/reminders", body, http.StatusOK, &again); err != nil {
		return err
	}
	fmt.Printf("self-test: POST /reminders again with id %s: 200, still due %s\n", again.ID, again.Due.Format(time.RFC3339Nano))

	if err := waitDelivery(ctx, created.ID, delay+10*time.Second, delivered); err != nil {
		return err
	}
	if err := call(ctx, http.MethodGet, base+"/reminders/"+created.ID, nil, http.StatusOK, &got); err != nil {
		return err
	}
	if got.State != queue.StateFired {
		return fmt.Errorf("delivered, but GET says %s", got.State)
	}
	fmt.Printf("self-test: GET /reminders/%s: %s at %s; self-test passed\n", got.ID, got.State, got.FiredAt.Format(time.RFC3339Nano))
	return nil
}

func waitDelivery(ctx context.Context, id string, timeout time.Duration, delivered <-chan string) error {
	deadline := time.After(timeout)
	for {
		select {
		case got := <-delivered:
			if got == id { // else an older reminder, on a Redis used before
				return nil
			}
		case <-deadline:
			return errors.New("the reminder was not delivered; is timerworker --namespace reminders running against this Redis? (or pass -poller)")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// call makes one request and decodes the JSON reply into out.
func call(ctx context.Context, method, url string, body []byte, want int, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		var e map[string]string
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return fmt.Errorf("%s %s: %s %s", method, url, resp.Status, e["error"])
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
