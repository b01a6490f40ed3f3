package apiserver

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/timerq/timerq/api/apitoken"
)

// The request metrics follow OpenTelemetry's HTTP semantic conventions, as
// the OpenTelemetry Prometheus exporter names them, so that dashboards made
// for any instrumented HTTP server work: http.server.request.duration
// becomes http_server_request_duration_seconds with the attributes
// http.request.method, http.route and http.response.status_code as labels.
// The route is the ServeMux pattern's path, never the raw path (whose
// timer IDs would make a series each).
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

type metrics struct {
	duration   *prometheus.HistogramVec
	inFlight   *prometheus.GaugeVec
	tokens     prometheus.Gauge
	reloadedOK prometheus.Gauge
}

// newMetrics registers the metrics on reg; with reg nil they are kept but
// not exported.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "http_server_request_duration_seconds",
			Help:    "Duration of HTTP API requests, by method, route (the ServeMux pattern) and status (OpenTelemetry http.server.request.duration).",
			Buckets: durationBuckets,
		}, []string{"http_request_method", "http_route", "http_response_status_code"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "http_server_active_requests",
			Help: "HTTP API requests in flight, long polls and event streams included (OpenTelemetry http.server.active_requests).",
		}, []string{"http_request_method"}),
		tokens: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "timerq_api_tokens", Help: "Tokens in the API's tokens file as last loaded (0 without a tokens file).",
		}),
		reloadedOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "timerq_api_tokens_last_reload_successful",
			Help: "1 if the tokens file loaded at the last start or SIGHUP, 0 if that reload failed and the previous tokens stay in use.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.duration, m.inFlight, m.tokens, m.reloadedOK} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) active(method string) prometheus.Gauge { return m.inFlight.WithLabelValues(method) }

func (m *metrics) observe(method, route string, status int, d time.Duration) {
	m.duration.WithLabelValues(method, routePath(route), strconv.Itoa(status)).Observe(d.Seconds())
}

func (m *metrics) setTokens(s *apitoken.Set, ok bool) {
	if s != nil {
		m.tokens.Set(float64(s.Len()))
	}
	if ok {
		m.reloadedOK.Set(1)
	} else {
		m.reloadedOK.Set(0)
	}
}
