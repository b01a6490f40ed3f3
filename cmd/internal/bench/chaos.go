package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/queue"
)

// ChaosConfig sizes the chaos scenario.
type ChaosConfig struct {
	Timers int           `flag:"timers" default:"20_000" usage:"chaos: timers due over --window"`
	Window time.Duration `flag:"window" default:"10s" usage:"chaos: the span the due times cover"`
	// Lead lets scheduling run through the crashes too.
	Lead         time.Duration `flag:"lead" default:"1s" usage:"chaos: how long before its due time each timer is scheduled"`
	KillEvery    time.Duration `flag:"kill-every" cli:"500ms" usage:"chaos: SIGKILL a random timerworker this often, and start another (0: never)"`
	RedisCrashes int           `flag:"redis-crashes" usage:"chaos: SIGKILL redis-server this many times in the window, and restart it from its AOF"`
	RedisDown    time.Duration `flag:"redis-down" default:"500ms" usage:"chaos: how long Redis stays down at each crash"`
	Settle       time.Duration `flag:"settle" default:"30s" usage:"chaos: how long to wait after the window for the last timers before counting them lost"`
	// Shards above 1 share the namespace's shards among the workers by
	// membership, so a killed worker's shards wait for the others.
	Shards int `flag:"shards" default:"1" usage:"chaos: the namespace's shards, shared by the workers by membership (1: unsharded)"`
}

// ChaosResult is what the fire stream says after workers and Redis were
// killed while timers came due. Lost, Duplicates, FiredEarly, Vanished and
// PayloadMismatches must all be 0.
type ChaosResult struct {
	Common
	Timers  int `json:"timers"`
	Workers int `json:"workers"`
	Shards  int `json:"shards"`
	// AppendFsync is the private redis-server's AOF policy ("off": none).
	AppendFsync string `json:"appendfsync"`
	// Fired is how many of the timers have a fire entry in the stream at
	// the end.
	Fired int64 `json:"fired"`
	// Checks: Lost is scheduled (acknowledged) but without a fire entry at
	// the end; Duplicates counts fire events beyond the first per timer,
	// over every event seen live or in the stream at the end; FiredEarly
	// counts events whose fired time is before the due time.
	Checks
	// Vanished counts fire entries a live reader saw that were gone after
	// a Redis restart: a fire observed and then undone.
	Vanished int64 `json:"vanished"`
	// Mismatches counts fire entries whose due time or payload differs
	// from what was scheduled.
	Mismatches int64 `json:"mismatches"`
	// WakeDuplicates counts timers whose "fired" pub/sub message arrived
	// more than once (a message lost in an outage is not counted: pub/sub
	// does not promise delivery).
	WakeDuplicates int64 `json:"wake_duplicates"`
	WorkerKills    int   `json:"worker_kills"`
	// WorkerRestarts counts workers that exited on their own (a worker
	// started while Redis was down fails its start-up check) and were
	// started again.
	WorkerRestarts int `json:"worker_restarts"`
	RedisCrashes   int `json:"redis_crashes"`
	// RedisDownMs is the total time from each SIGKILL of Redis until it
	// answered PING again with its AOF loaded.
	RedisDownMs int64 `json:"redis_down_ms"`
	// ScheduleRetries counts ScheduleBatch calls that failed (Redis down)
	// and were retried; a timer counts only once a call acknowledged it.
	ScheduleRetries int   `json:"schedule_retries"`
	LatenessP50     int64 `json:"lateness_p50_ms"`
	LatenessP99     int64 `json:"lateness_p99_ms"`
	LatenessMax     int64 `json:"lateness_max_ms"`
}

// Chaos schedules cfg.Timers timers coming due over cfg.Window, each
// cfg.Lead ahead, while a random timerworker is SIGKILLed and restarted
// every cfg.KillEvery and the private redis-server (AOF, appendfsync
// always) is SIGKILLed and restarted cfg.RedisCrashes times; then it
// compares the fire stream with what was scheduled.
//
// A fire stream read once at the end, after AOF replay, shows only what
// survived: a fire that some reader saw and a crash then undid would be
// invisible, and so would the same timer firing again. So a reader tails
// the stream live through the crashes, and duplicates are counted over the
// union of what it saw and what the stream holds at the end, by stream
// entry ID.
func (e *Env) Chaos(ctx context.Context, cfg ChaosConfig) (*ChaosResult, error) {
	withDefaults(&cfg)
	if err := e.checkChaos(cfg); err != nil {
		return nil, err
	}
	shards := max(cfg.Shards, 1)
	st, err := e.prepare(ctx, setup{name: "chaos", startWorkers: true, client: "timerbench-chaos", shards: shards})
	if err != nil {
		return nil, err
	}
	defer st.close()
	c, err := e.newChaosRun(ctx, st, cfg, shards)
	if err != nil {
		return nil, err
	}

	octx, stopObservers := context.WithCancel(ctx)
	var obs sync.WaitGroup
	obs.Go(func() { c.tailFires(octx) })
	obs.Go(func() { c.countWakes(octx) })
	defer obs.Wait()
	defer stopObservers()

	e.logf("chaos: %d timers due over %v, %d shards, %d workers, a worker killed every %v, %d Redis crashes",
		cfg.Timers, cfg.Window, shards, e.cfg.Workers, cfg.KillEvery, cfg.RedisCrashes)
	w := e.startWindow(ctx)
	if err := c.scheduleAndKill(ctx); err != nil {
		return nil, err
	}
	want := c.settle(ctx)
	c.redisCPU += e.redisCPU(ctx)
	c.r.Common = w.end(ctx, "chaos")
	c.r.RedisCPUS = round3(c.redisCPU - w.redis) // INFO restarts from 0 with each server
	cpu, _ := c.ws.stop()                        // killed workers exit non-zero: not a failure here
	c.r.WorkerCPUS = round3(c.workerCPU + cpu)
	time.Sleep(100 * time.Millisecond) // let the live reader catch up
	stopObservers()
	obs.Wait()

	if err := c.verify(ctx); err != nil {
		return nil, err
	}
	if int(want) != cfg.Timers {
		return nil, fmt.Errorf("bench: chaos: only %d of %d timers were acknowledged", want, cfg.Timers)
	}
	return c.r, nil
}

// checkChaos refuses a configuration the scenario cannot run, and warns of
// one whose crashes may lose acknowledged writes.
func (e *Env) checkChaos(cfg ChaosConfig) error {
	switch {
	case cfg.Shards < 0 || cfg.Shards > queue.MaxShards:
		return fmt.Errorf("bench: chaos: --shards %d is outside 0..%d", cfg.Shards, queue.MaxShards)
	case cfg.Timers < 1 || cfg.Window <= 0 || cfg.Lead <= 0 || cfg.KillEvery < 0 || cfg.RedisCrashes < 0 || cfg.RedisDown < 0:
		return fmt.Errorf("bench: chaos: --timers, --window and --lead must be positive, --kill-every, --redis-crashes and --redis-down not negative")
	case cfg.RedisCrashes > 0 && e.server == nil:
		return fmt.Errorf("bench: chaos: --redis-crashes needs the redis-server timerbench starts itself; drop --redis")
	case cfg.RedisCrashes > 0 && e.cfg.AppendFsync != "always":
		e.logf("chaos: warning: --appendfsync %q: acknowledged writes may be lost in a crash", e.cfg.AppendFsync)
	}
	return nil
}

// chaosRun is one run of the chaos scenario: what its phases share.
type chaosRun struct {
	e   *Env
	cfg ChaosConfig
	q   *queue.Queue
	ws  *workers
	r   *ChaosResult

	streams, dues []string // per shard: the fire stream and the due set
	run           uint32   // tags this run's timer IDs and payloads
	start, t0     time.Time
	step          time.Duration
	acked         []bool // written by the scheduler until it returns

	mu    sync.Mutex           // guards live and wakes, which the observers write
	live  map[string]fireEvent // fire entries the live reader saw, by stream and ID
	wakes map[string]int       // "fired" messages per timer channel

	workerCPU, redisCPU float64 // of workers and servers already gone

	// The killer's state.
	scheduling bool
	schedDone  chan error
	crashAt    []time.Time // local clock
	crashing   bool
	crashDone  chan crashOutcome
}

// crashOutcome is how a Redis crash in the background ended.
type crashOutcome struct {
	down time.Duration
	err  error
}

// newChaosRun reads the namespace's layout and fixes the timers' due
// times.
func (e *Env) newChaosRun(ctx context.Context, st *stage, cfg ChaosConfig, shards int) (*chaosRun, error) {
	q := st.q
	if _, err := q.Inspect().Shards(ctx); err != nil { // reads the layout the key names below need
		return nil, fmt.Errorf("bench: chaos: %w", err)
	}
	c := &chaosRun{e: e, cfg: cfg, q: q, ws: st.ws,
		streams: make([]string, shards), dues: make([]string, shards),
		live: make(map[string]fireEvent), wakes: make(map[string]int),
		acked: make([]bool, cfg.Timers),
	}
	for k := range shards {
		c.streams[k], c.dues[k] = q.Keys().Stream(k), q.Keys().Shard(k)[0]
	}
	c.r = &ChaosResult{Timers: cfg.Timers, Workers: e.cfg.Workers, Shards: shards, AppendFsync: e.cfg.AppendFsync}
	if e.server == nil {
		c.r.AppendFsync = "unknown (--redis)"
	} else if c.r.AppendFsync == "" {
		c.r.AppendFsync = "off"
	}
	c.run = rand.Uint32()
	c.start = e.serverNow()
	c.t0 = c.start.Add(cfg.Lead)
	c.step = cfg.Window / time.Duration(cfg.Timers)
	return c, nil
}

func (c *chaosRun) dueOf(i int) time.Time {
	return c.t0.Add(time.Duration(i) * c.step).Truncate(time.Millisecond)
}

func (c *chaosRun) payloadOf(i int) []byte { return fmt.Appendf(nil, "chaos:%d:\x00:%x", i, c.run) }

// scheduleAndKill runs the scheduler in the background and, until it is
// done, the window has passed and no crash is in flight, kills workers and
// Redis. It returns once neither runs in the background any more.
func (c *chaosRun) scheduleAndKill(ctx context.Context) error {
	e, cfg := c.e, c.cfg
	// The scheduler: timer i is scheduled once the server clock reaches its
	// due time minus the lead; a failed batch is retried until acknowledged.
	c.schedDone = make(chan error, 1)
	sctx, stopSched := context.WithCancel(ctx)
	c.scheduling = true
	go func() { c.schedDone <- c.schedule(sctx) }()
	defer func() { // on an early return, the scheduler stops with us
		stopSched()
		if c.scheduling {
			<-c.schedDone
		}
	}()

	// The killer: workers every KillEvery, Redis at even points of the
	// window; workers that exit on their own are started again.
	end := c.t0.Add(cfg.Window).Add(-e.offset) // local clock
	for k := range cfg.RedisCrashes {
		c.crashAt = append(c.crashAt, c.t0.Add(cfg.Window*time.Duration(k+1)/time.Duration(cfg.RedisCrashes+1)).Add(-e.offset))
	}
	var killC <-chan time.Time
	if cfg.KillEvery > 0 {
		kt := time.NewTicker(cfg.KillEvery)
		defer kt.Stop()
		killC = kt.C
	}
	supervise := time.NewTicker(100 * time.Millisecond)
	defer supervise.Stop()
	c.crashDone = make(chan crashOutcome, 1)
	defer func() { // Close must not race a restart in flight
		if c.crashing {
			<-c.crashDone
		}
	}()
	for c.scheduling || c.crashing || time.Now().Before(end) {
		var crash <-chan time.Time
		if len(c.crashAt) > 0 && !c.crashing {
			crash = time.After(time.Until(c.crashAt[0]))
		}
		var err error
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err = <-c.schedDone:
			c.scheduling = false
		case <-killC:
			err = c.killWorker(end)
		case <-crash:
			c.crashRedis(ctx)
		case o := <-c.crashDone:
			err = c.crashEnded(o)
		case <-supervise.C:
			err = c.superviseWorkers()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// killWorker SIGKILLs a random worker that is running and starts another
// in its place; after end it kills none.
func (c *chaosRun) killWorker(end time.Time) error {
	if time.Now().After(end) {
		return nil
	}
	i := rand.N(len(c.ws.procs))
	if c.ws.procs[i].exited() {
		return nil // the supervisor restarts it
	}
	_ = c.ws.procs[i].cmd.Process.Kill()
	<-c.ws.procs[i].done
	c.r.WorkerKills++
	return c.restart(i)
}

// crashRedis crashes Redis in the background, so that workers keep being
// killed and started while Redis is down; crashDone says how it ended.
func (c *chaosRun) crashRedis(ctx context.Context) {
	c.crashAt = c.crashAt[1:]
	c.redisCPU += c.e.redisCPU(ctx)
	c.crashing = true
	go func(t time.Time) {
		err := c.e.crashRedis(ctx, c.cfg.RedisDown)
		c.crashDone <- crashOutcome{time.Since(t), err}
	}(time.Now())
}

// crashEnded counts a Redis crash that ended with Redis back up.
func (c *chaosRun) crashEnded(o crashOutcome) error {
	c.crashing = false
	if o.err != nil {
		return o.err
	}
	c.r.RedisCrashes++
	c.r.RedisDownMs += o.down.Milliseconds()
	return nil
}

// superviseWorkers starts another worker in place of each that exited by
// itself.
func (c *chaosRun) superviseWorkers() error {
	for i, p := range c.ws.procs {
		if !p.exited() {
			continue
		}
		c.e.logf("chaos: timerworker pid %d exited by itself (%s); starting another: %s",
			p.cmd.ProcessState.Pid(), p.cmd.ProcessState, lastLine(p.stderr.String()))
		c.r.WorkerRestarts++
		if err := c.restart(i); err != nil {
			return err
		}
	}
	return nil
}

// restart starts a worker in place of worker i, which has exited, and
// keeps the CPU time it used.
func (c *chaosRun) restart(i int) error {
	if st := c.ws.procs[i].cmd.ProcessState; st != nil {
		c.workerCPU += (st.UserTime() + st.SystemTime()).Seconds()
	}
	p, err := c.e.spawnWorker()
	if err != nil {
		return err
	}
	c.ws.procs[i] = p
	return nil
}

// settle waits for the stragglers: every acknowledged timer has left the
// due set and has a fire entry, or Settle passes and the rest are lost. It
// returns how many timers were acknowledged.
func (c *chaosRun) settle(ctx context.Context) int64 {
	var want int64
	for _, a := range c.acked {
		if a {
			want++
		}
	}
	c.e.logf("chaos: all %d timers scheduled; waiting for the last to fire", want)
	_ = waitUntil(ctx, c.cfg.Settle, 50*time.Millisecond, func() (bool, error) {
		var n, d int64
		for k := range c.streams {
			nk, err1 := c.e.rdb.XLen(ctx, c.streams[k]).Result()
			dk, err2 := c.e.rdb.ZCard(ctx, c.dues[k]).Result()
			if err1 != nil || err2 != nil {
				return false, nil
			}
			n, d = n+nk, d+dk
		}
		return n >= want && d == 0, nil
	})
	time.Sleep(200 * time.Millisecond) // a late duplicate would land now
	return want
}

// verify compares what the live reader saw and what the fire streams hold
// at the end with what was acknowledged, and fills in the checks,
// Fired and the lateness of r.
func (c *chaosRun) verify(ctx context.Context) error {
	final := make(map[string]fireEvent)
	for _, stream := range c.streams {
		if err := eachFire(ctx, c.e.rdb, stream, func(sid string, ev fireEvent) { final[stream+" "+sid] = ev }); err != nil {
			return err
		}
	}
	expected := make(map[string]int, c.cfg.Timers)
	for i := range c.cfg.Timers {
		if c.acked[i] {
			expected[timerID(c.run, i)] = i
		}
	}
	c.countEvents(final, expected)
	first := make(map[string]fireEvent, len(expected))
	for _, ev := range final {
		if _, ok := expected[ev.id]; !ok {
			continue
		}
		if f, ok := first[ev.id]; !ok || ev.fired < f.fired {
			first[ev.id] = ev
		}
	}
	r := c.r
	r.Fired = int64(len(first))
	r.Lost = int64(len(expected)) - r.Fired
	lateness := make([]int64, 0, len(first))
	for _, ev := range first {
		lateness = append(lateness, ev.fired-ev.due)
	}
	slices.Sort(lateness)
	r.LatenessP50, r.LatenessP99, r.LatenessMax = pct(lateness, 0.5), pct(lateness, 0.99), pct(lateness, 1)
	for _, n := range c.wakes {
		if n > 1 {
			r.WakeDuplicates++
		}
	}
	return nil
}

// countEvents counts, over every distinct event by stream entry ID (the
// live reader's and the final stream's), the vanished, duplicate, early
// and mismatched fires of acknowledged timers.
func (c *chaosRun) countEvents(final map[string]fireEvent, expected map[string]int) {
	r := c.r
	events := make(map[string]fireEvent, len(final))
	for sid, ev := range c.live { // the observers have stopped
		events[sid] = ev
		if _, ok := final[sid]; !ok {
			r.Vanished++
		}
	}
	maps.Copy(events, final)
	perTimer := make(map[string]int, len(expected))
	for _, ev := range events {
		i, ok := expected[ev.id]
		if !ok {
			continue // not acknowledged: it may or may not exist
		}
		perTimer[ev.id]++
		if perTimer[ev.id] > 1 {
			r.Duplicates++
		}
		if ev.fired < ev.due {
			r.FiredEarly++
		}
		if ev.payload != string(c.payloadOf(i)) || ev.due != c.dueOf(i).UnixMilli() {
			r.Mismatches++
		}
	}
}

// schedule schedules the timers in due order, each Lead ahead, and marks
// each acknowledged one; a batch that fails is retried (Schedule is
// idempotent by ID, so a batch that ran but whose reply was lost is
// harmless to send again).
func (c *chaosRun) schedule(ctx context.Context) error {
	return c.e.pace(ctx, c.start, c.step, c.cfg.Timers, 1000, 5*time.Millisecond, func(batch []queue.NewTimer, from int) error {
		for i := range batch {
			batch[i] = queue.NewTimer{ID: timerID(c.run, from+i), Due: c.dueOf(from + i), Payload: c.payloadOf(from + i)}
		}
		giveUp := time.Now().Add(c.cfg.Settle)
		for {
			_, err := c.q.ScheduleBatch(ctx, batch)
			if err == nil {
				break
			}
			if errors.Is(err, queue.ErrInvalidID) || errors.Is(err, queue.ErrInvalidDue) || ctx.Err() != nil || time.Now().After(giveUp) {
				return fmt.Errorf("bench: chaos: ScheduleBatch: %w", err)
			}
			c.r.ScheduleRetries++
			time.Sleep(20 * time.Millisecond)
		}
		for i := range batch {
			c.acked[from+i] = true
		}
		return nil
	})
}

// tailFires reads the fire streams (one per shard) with XREAD as entries
// arrive, through Redis restarts, until ctx ends. It keys what it saw by
// stream and entry ID, as verify does.
func (c *chaosRun) tailFires(ctx context.Context) {
	rdb, err := c.e.client("timerbench-chaos-tail", 1)
	if err != nil {
		return
	}
	defer rdb.Close()
	last := make([]string, len(c.streams))
	for i := range last {
		last[i] = "0"
	}
	for ctx.Err() == nil {
		res, err := rdb.XRead(ctx, &redis.XReadArgs{Streams: append(slices.Clone(c.streams), last...), Count: 1000, Block: 200 * time.Millisecond}).Result()
		if err != nil {
			if !errors.Is(err, redis.Nil) {
				time.Sleep(20 * time.Millisecond) // Redis down or loading
			}
			continue
		}
		c.mu.Lock()
		for _, s := range res {
			for _, m := range s.Messages {
				if ev, err := parseFire(m); err == nil {
					c.live[s.Stream+" "+m.ID] = ev
				}
				last[slices.Index(c.streams, s.Stream)] = m.ID
			}
		}
		c.mu.Unlock()
	}
}

// countWakes counts the "fired" messages on every timer channel until ctx
// ends; go-redis resubscribes after a Redis restart.
func (c *chaosRun) countWakes(ctx context.Context) {
	rdb, err := c.e.client("timerbench-chaos-wakes", 1)
	if err != nil {
		return
	}
	defer rdb.Close()
	var patterns []string
	for k := range c.streams {
		patterns = append(patterns, keyspace.Shard(c.q.Namespace(), k, len(c.streams)).TimerChannel("*"))
	}
	ps := rdb.PSubscribe(ctx, patterns...)
	defer ps.Close()
	ch := ps.Channel(redis.WithChannelSize(10_000))
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			if m.Payload == "fired" {
				c.mu.Lock()
				c.wakes[m.Channel]++
				c.mu.Unlock()
			}
		}
	}
}

// lastLine is the last non-empty line of s, for a short log message.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}
