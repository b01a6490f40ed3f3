package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// workers is a set of running timerworker processes.
type workers struct {
	procs []*workerProc
}

type workerProc struct {
	cmd    *exec.Cmd
	done   chan struct{}
	stderr *syncBuffer
}

// syncBuffer is a bytes.Buffer safe for the writer goroutine of exec and
// the reader here.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b.Len() > 64<<10 {
		return len(p), nil // keep the start, where start-up errors are
	}
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startWorkers starts n timerworker processes against the bench's Redis
// and namespace, with extra flags after the bench's own, and returns once
// ready(n) says they all run (so that none misses the first schedule's
// wake message).
func (e *Env) startWorkers(ctx context.Context, n int, ready func(n int) (bool, error), extra ...string) (*workers, error) {
	if e.workers == "" {
		if err := e.buildWorker(ctx); err != nil {
			return nil, err
		}
	}
	ws := &workers{}
	for range n {
		p, err := e.spawnWorker(extra...)
		if err != nil {
			ws.stop()
			return nil, err
		}
		ws.procs = append(ws.procs, p)
	}
	err := waitUntil(ctx, 20*time.Second, 20*time.Millisecond, func() (bool, error) {
		for _, p := range ws.procs {
			if p.exited() {
				return false, fmt.Errorf("bench: timerworker exited at start: %s", p.stderr.String())
			}
		}
		return ready(n)
	})
	if err != nil {
		ws.stop()
		return nil, fmt.Errorf("bench: waiting for %d timerworkers to start: %w", n, err)
	}
	e.logf("%d timerworker processes running (batch size %d)", n, e.cfg.BatchSize)
	return ws, nil
}

// subscribers counts the subscribers of channel: workers use sharded
// pub/sub on Redis 7.0+ (SSUBSCRIBE), classic pub/sub before, so both.
func subscribers(ctx context.Context, rdb redis.UniversalClient, channel string) (int, error) {
	n, err := rdb.PubSubNumSub(ctx, channel).Result()
	if err != nil {
		return 0, fmt.Errorf("bench: PUBSUB NUMSUB: %w", err)
	}
	sn, err := rdb.PubSubShardNumSub(ctx, channel).Result()
	if err != nil && !strings.Contains(err.Error(), "unknown") {
		return 0, fmt.Errorf("bench: PUBSUB SHARDNUMSUB: %w", err)
	}
	return int(n[channel] + sn[channel]), nil
}

// spawnWorker starts one timerworker process against the bench's Redis
// and namespace, with extra flags after the bench's own.
func (e *Env) spawnWorker(extra ...string) (*workerProc, error) {
	cmd := exec.Command(e.workers, append([]string{
		"--redis", e.url,
		"--namespace", e.cfg.Namespace,
		"--batch-size", strconv.Itoa(e.cfg.BatchSize),
		"--log-level", "warn"}, extra...)...)
	cmd.Env = append(os.Environ(), e.tracing.workerEnv()...)
	p := &workerProc{cmd: cmd, done: make(chan struct{}), stderr: &syncBuffer{}}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: starting %s: %w; pass --worker-bin with a working timerworker", e.workers, err)
	}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

// stop stops one process with SIGTERM, SIGKILL after 10 s.
func (p *workerProc) stop() { terminate(p.cmd.Process, p.done, 10*time.Second) }

// terminate sends p SIGTERM and, if done is not closed within grace,
// SIGKILL, and waits for done.
func terminate(p *os.Process, done <-chan struct{}, grace time.Duration) {
	_ = p.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(grace):
		_ = p.Kill()
		<-done
	}
}

// exited reports whether the process has exited.
func (p *workerProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop stops every worker with SIGTERM (SIGKILL after 10 s) and returns
// their total CPU seconds and the stderr of any that failed.
func (ws *workers) stop() (cpu float64, errs string) {
	for _, p := range ws.procs {
		_ = p.cmd.Process.Signal(syscall.SIGTERM) // all at once, then wait for each
	}
	for _, p := range ws.procs {
		p.stop()
		if st := p.cmd.ProcessState; st != nil {
			cpu += (st.UserTime() + st.SystemTime()).Seconds()
			if !st.Success() {
				errs += fmt.Sprintf("pid %d: %s: %s\n", st.Pid(), st, p.stderr.String())
			}
		}
	}
	ws.procs = nil
	return cpu, errs
}
