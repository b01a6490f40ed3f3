package redistest

import (
	"bytes"
	"sync"
)

// SyncBuffer is a bytes.Buffer that a test may read while a server, a
// command or a logger in another goroutine (or process, as its stdout)
// writes it. The zero value is ready to use.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what has been written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
