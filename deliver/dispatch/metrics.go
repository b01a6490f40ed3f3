package dispatch

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/timerq/timerq/deliver"
)

// Metrics are the Prometheus collectors of a Dispatcher, like
// poller.Metrics: create them with NewMetrics, register them with
// Register (under a namespace label, as timerworker does) and set
// Dispatcher.OnAttempt to Observe. The endpoint label is the endpoint's
// name, so its cardinality is the namespace's endpoint count.
type Metrics struct {
	// Deliveries counts attempts by endpoint and outcome: delivered, retry
	// or dead_letter (timerq_deliveries_total).
	Deliveries *prometheus.CounterVec
	// AttemptSeconds observes each attempt's latency, by endpoint
	// (timerq_delivery_attempt_seconds).
	AttemptSeconds *prometheus.HistogramVec
	// Lateness observes, for each delivered fire, the time from its due
	// time to the end of the attempt that delivered it, by endpoint
	// (timerq_delivery_lateness_seconds): kept apart from the fire
	// lateness of timerq_fire_lateness_seconds.
	Lateness *prometheus.HistogramVec
	// DeadLetters counts fires dead-lettered by endpoint and reason
	// (timerq_delivery_dead_letters_total), deadline included: a fire not
	// sent, or not retried, because its deadline would have passed.
	DeadLetters *prometheus.CounterVec
	// Retries counts fires released for a retry, by endpoint
	// (timerq_delivery_retries_total): their rate is the retry backlog's
	// inflow.
	Retries *prometheus.CounterVec
	// DeliveryDelay observes, for each fire's first attempt, the time from
	// its firing to the attempt's start, by endpoint and flow ("keyed" for
	// a timer with a flow key, "none" otherwise)
	// (timerq_delivery_delay_seconds): the wait that delivery, flow
	// control included, adds after the fire, apart from the fire's own
	// lateness (timerq_fire_lateness_seconds). There is no label per flow
	// key, so a million keys cannot blow up the series; timerctl flow
	// stats shows each key's backlog.
	DeliveryDelay *prometheus.HistogramVec

	inFlight prometheus.GaugeFunc
}

// NewMetrics returns unregistered collectors; inFlight, if not nil, is
// read at each scrape as timerq_deliveries_in_flight (Dispatcher.Held).
func NewMetrics(inFlight func() int) *Metrics {
	buckets := []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}
	m := &Metrics{
		Deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "timerq_deliveries_total",
			Help: "Delivery attempts by endpoint and outcome: delivered (2xx), retry (to be tried again) or dead_letter (given up).",
		}, []string{"endpoint", "outcome"}),
		AttemptSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "timerq_delivery_attempt_seconds", Help: "Duration of each delivery attempt, from sending the request to reading the answer (or failing).",
			Buckets: buckets,
		}, []string{"endpoint"}),
		Lateness: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "timerq_delivery_lateness_seconds",
			Help:    "For each delivered fire, due time to the end of the attempt that delivered it (retries included); timerq_fire_lateness_seconds is due to fired.",
			Buckets: buckets,
		}, []string{"endpoint"}),
		DeadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "timerq_delivery_dead_letters_total", Help: "Fires dead-lettered by the dispatcher, by endpoint and reason (gone, client_error, exhausted, expired, deadline, ...).",
		}, []string{"endpoint", "reason"}),
		Retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "timerq_delivery_retries_total", Help: "Fires released to be tried again after a failed attempt, by endpoint.",
		}, []string{"endpoint"}),
		DeliveryDelay: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "timerq_delivery_delay_seconds",
			Help:    "For each fire's first attempt, fired to the attempt's start: the delivery's own delay, flow control included, by endpoint and flow (keyed or none).",
			Buckets: buckets,
		}, []string{"endpoint", "flow"}),
	}
	if inFlight != nil {
		m.inFlight = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "timerq_deliveries_in_flight", Help: "Fires this process's dispatcher holds: attempts under way and fires waiting for a slot of their endpoint.",
		}, func() float64 { return float64(inFlight()) })
	}
	return m
}

// Register registers the collectors with reg.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	cs := []prometheus.Collector{m.Deliveries, m.AttemptSeconds, m.Lateness, m.DeadLetters, m.Retries, m.DeliveryDelay}
	if m.inFlight != nil {
		cs = append(cs, m.inFlight)
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// Observe records one attempt: a Dispatcher's OnAttempt. An attempt cut
// short by a stopping dispatcher is not counted. One not sent for the
// fire's deadline (Report.Unsent) counts only as a dead letter with the
// reason deadline: it made no attempt.
func (m *Metrics) Observe(r Report) {
	if r.Stopped {
		return
	}
	if r.Unsent {
		m.DeadLetters.WithLabelValues(r.Endpoint, string(r.Attempt.Reason)).Inc()
		return
	}
	outcome := r.Attempt.Outcome.String()
	m.Deliveries.WithLabelValues(r.Endpoint, outcome).Inc()
	m.AttemptSeconds.WithLabelValues(r.Endpoint).Observe(r.Attempt.Latency.Seconds())
	if r.Number == 1 && !r.Event.FiredAt.IsZero() {
		flow := "none"
		if r.Event.FlowKey != "" {
			flow = "keyed"
		}
		m.DeliveryDelay.WithLabelValues(r.Endpoint, flow).Observe(max(r.Attempt.At.Sub(r.Event.FiredAt), 0).Seconds())
	}
	switch r.Attempt.Outcome {
	case deliver.Delivered:
		m.Lateness.WithLabelValues(r.Endpoint).Observe(max(r.Attempt.At.Add(r.Attempt.Latency).Sub(r.Event.Due), 0).Seconds())
	case deliver.Retry:
		m.Retries.WithLabelValues(r.Endpoint).Inc()
	case deliver.DeadLetter:
		m.DeadLetters.WithLabelValues(r.Endpoint, string(r.Attempt.Reason)).Inc()
	}
}
