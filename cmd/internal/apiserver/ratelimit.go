package apiserver

import (
	"math"
	"sync"
	"time"

	"github.com/timerq/timerq/api/apitoken"
)

// bucket is a token bucket: it holds up to burst requests and refills at
// rate per second.
type bucket struct {
	mu          sync.Mutex
	rate, burst float64
	level       float64
	last        time.Time
	fresh       bool
}

// take takes one request from b at now; when b is empty it returns how
// long until one is there.
func (b *bucket) take(now time.Time) (time.Duration, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fresh {
		b.level, b.last, b.fresh = b.burst, now, false
	}
	if el := now.Sub(b.last); el > 0 {
		b.level = min(b.burst, b.level+el.Seconds()*b.rate)
		b.last = now
	}
	if b.level >= 1 {
		b.level--
		return 0, true
	}
	return time.Duration((1 - b.level) / b.rate * float64(time.Second)), false
}

// rate is tok's limit in requests per second; 0 is none.
func (s *Server) rate(tok *apitoken.Token) float64 {
	if tok.HasRPS {
		return tok.RPS
	}
	return s.cfg.RateLimit
}

// take counts one request of tok against its limit. Buckets are kept by
// token name across reloads, so a reload does not refill them; a token
// whose rate changed gets a new, full one.
func (s *Server) take(tok *apitoken.Token) (time.Duration, bool) {
	rate := s.rate(tok)
	if rate <= 0 {
		return 0, true
	}
	s.limitMu.Lock()
	b := s.buckets[tok.Name]
	if b == nil || b.rate != rate {
		b = &bucket{rate: rate, burst: math.Max(1, math.Ceil(rate)), fresh: true}
		s.buckets[tok.Name] = b
	}
	s.limitMu.Unlock()
	return b.take(s.cfg.Now())
}

// forgetBuckets drops the buckets of tokens that set no longer has, so
// that renamed and revoked tokens do not pile up.
func (s *Server) forgetBuckets(set *apitoken.Set) {
	s.limitMu.Lock()
	defer s.limitMu.Unlock()
	for name := range s.buckets {
		if set.Named(name) == nil {
			delete(s.buckets, name)
		}
	}
}
