package apiserver_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/timerq/timerq/cmd/internal/apiserver"
)

// BenchmarkAuthAndMetrics is what the server adds to each request before
// and after the API's handler (here a no-op): trace-context extraction,
// token lookup over a file of 1 or 100 lines, the rights check, a rate-limit
// bucket and the metrics, without the network.
func BenchmarkAuthAndMetrics(b *testing.B) {
	for _, others := range []int{0, 99} {
		b.Run(fmt.Sprintf("tokens=%d", others+1), func(b *testing.B) { benchAuth(b, others) })
	}
}

func benchAuth(b *testing.B, others int) {
	specs := []string{"bench namespaces=orders rights=write rps=1000000"}
	for i := range others {
		specs = append(specs, "other"+string(rune('a'+i%26))+string(rune('a'+i/26))+" namespaces=* rights=read")
	}
	file, tok := tokens(b, specs...)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/namespaces/{ns}/timers", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(201) })
	s, err := apiserver.Listen(apiserver.Config{Addr: "127.0.0.1:0", TokensFile: file, Metrics: prometheus.NewRegistry()}, mux, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	req := httptest.NewRequest("POST", "http://api/v1/namespaces/orders/timers", nil)
	req.Header.Set("Authorization", "Bearer "+tok["bench"])
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		if w.Code != 201 {
			b.Fatal(w.Code, w.Body.String())
		}
	}
}
