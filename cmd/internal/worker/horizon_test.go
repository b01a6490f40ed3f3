package worker

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/cmd/internal/apiserver"
	"github.com/timerq/timerq/cmd/internal/cliconf"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// TestWorkerExportsTheDueHorizon: a worker serving metrics reads the due
// horizon of its namespace as it starts, without a scrape asking, and
// exports it with the namespace label; an API-only replica too, as every
// replica exports the backlog gauges.
func TestWorkerExportsTheDueHorizon(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		ns := redistest.Namespace(t)
		if _, err := queue.CreateNamespace(ctx, b.Client, ns, 4); err != nil {
			t.Fatal(err)
		}
		q, err := queue.New(b.Client, queue.Options{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		now := time.Now()
		var batch []queue.NewTimer
		for i, off := range []time.Duration{-time.Hour, -time.Minute, 40 * time.Minute, 4 * 24 * time.Hour, 10 * 24 * time.Hour} {
			batch = append(batch, queue.NewTimer{ID: fmt.Sprintf("t%d", i), Due: now.Add(off)})
		}
		if _, err := q.ScheduleBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
		metrics := freeAddr(t)
		runWorker(t, Config{Conn: cliconf.Conn{RedisURL: redisURL(b)}, Namespaces: []string{ns}, NoClaim: true,
			MetricsAddr: metrics, API: apiserver.Config{Addr: "127.0.0.1:0"}, APIHandler: fakeAPI(nil)})
		var want []string
		for _, w := range []struct {
			within string
			n      int
		}{{"overdue", 2}, {"1m", 2}, {"1h", 3}, {"1d", 3}, {"1w", 4}} {
			want = append(want, fmt.Sprintf(`timerq_namespace_due_timers{namespace="%s",within="%s"} %d`, ns, w.within, w.n))
		}
		var text string
		redistest.Eventually(t, 10*time.Second, "/metrics to export the due horizon", func() bool {
			text = scrape(metrics)
			for _, w := range want {
				if !strings.Contains(text, w+"\n") {
					return false
				}
			}
			return true
		})
		if !strings.Contains(text, `timerq_namespace_due_timers_age_seconds{namespace="`+ns+`"} `) {
			t.Errorf("no age of the read:\n%s", text)
		}
	})
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// scrape returns the text of /metrics at addr, "" when it cannot.
func scrape(addr string) string {
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 2 * time.Second}).Get("http://" + addr + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return string(raw)
}
