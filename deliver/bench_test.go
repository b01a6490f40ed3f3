package deliver_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/timerq/timerq/deliver"
)

// BenchmarkSend is one signed attempt (two secrets, as in a rotation) to
// a local Go sink over keep-alive connections: the cost of the delivery
// engine itself, without Redis. Run with -cpu to vary the senders.
func BenchmarkSend(b *testing.B) {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer sink.Close()
	s1, _ := deliver.ParseSecret(deliver.GenerateSecret())
	s2, _ := deliver.ParseSecret(deliver.GenerateSecret())
	snd := &deliver.Sender{Guard: &deliver.Guard{Allow: loopback}}
	defer snd.CloseIdleConnections()
	ep := deliver.Endpoint{Name: "bench", URL: sink.URL, Secrets: []deliver.Secret{s1, s2}}
	f := deliver.Fire{Namespace: "bench", TimerID: "t", Due: time.Now(), FiredAt: time.Now(), Payload: []byte(`{"order":42,"note":"a small JSON payload"}`), Attempt: 1}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if a := snd.Send(context.Background(), ep, f); a.Outcome != deliver.Delivered {
				b.Errorf("%+v", a)
				return
			}
		}
	})
}
