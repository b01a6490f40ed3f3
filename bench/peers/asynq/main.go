// Command asynqbench measures asynq (github.com/hibiken/asynq) as a timer
// queue under the scenarios of timerq's `timerbench steady` and
// `timerbench burst`, so that Redis CPU per timer, fires/s and lateness can be
// compared between the two.
//
// It has two roles:
//
//	asynqbench -redis ADDR -scenario steady|burst [flags]   coordinator
//	asynqbench worker -redis ADDR [flags]                    one asynq.Server
//
// The coordinator expects an empty, private redis-server at ADDR. It starts
// -workers copies of itself in the worker role, waits until each is ready (and
// 1 s more, so the servers are idle), then enqueues every task with
// client.Enqueue(task, asynq.ProcessAt(due)). A task's payload is its id and
// due time; the handler only records its own start time, and each worker
// prints "id due_ns start_ns" lines that the coordinator reads from its stdout.
//
//   - steady: -rate tasks/s come due for -duration, each enqueued -lead (3 s)
//     before it is due, by one producer that wakes every 2 ms. The measured
//     window runs from just before the first enqueue until the coordinator has
//     seen every task run.
//   - burst: -tasks tasks all due at one instant, a whole second at least
//     -lead (5 s) after start, enqueued by -enqueue-goroutines goroutines
//     sharing one asynq.Client. The window runs from the due instant until the
//     coordinator has seen every task run.
//
// Redis CPU is the change of INFO cpu used_cpu_user + used_cpu_sys over the
// window. Lateness is handler start − due, signed (negative = ran early). A
// task not seen -lost-after the last due time is lost; runs seen up to
// -dup-wait after the last first run count as duplicates. The result is one
// JSON object on stdout.
package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// taskType is the one task type the workers handle.
const taskType = "t"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "worker" {
		runWorker(os.Args[2:])
		return
	}
	runCoordinator()
}

// encodePayload packs a task's id and due time (Unix ns) into its payload, so
// the handler can report both without any lookup.
func encodePayload(id uint64, dueNs int64) []byte {
	p := make([]byte, 16)
	binary.LittleEndian.PutUint64(p[0:8], id)
	binary.LittleEndian.PutUint64(p[8:16], uint64(dueNs))
	return p
}

// runWorker runs one asynq.Server and prints "READY", then one
// "id due_ns start_ns" line per task run.
func runWorker(args []string) {
	fs := flag.NewFlagSet("worker", flag.ExitOnError)
	addr := fs.String("redis", "", "address of the private redis-server (required)")
	concurrency := fs.Int("concurrency", 10, "asynq Config.Concurrency")
	delayedInterval := fs.Duration("delayed-interval", 0, "asynq Config.DelayedTaskCheckInterval (0 = asynq default, 5s)")
	taskCheckInterval := fs.Duration("task-check-interval", 0, "asynq Config.TaskCheckInterval (0 = asynq default, 1s)")
	fs.Parse(args)
	if *addr == "" {
		fmt.Fprintln(os.Stderr, "worker: -redis is required")
		os.Exit(2)
	}

	// The handler only appends to a buffer, so that writing to the pipe
	// never delays a task's start time; the loop below flushes it.
	var mu sync.Mutex
	var pending []byte
	handler := func(ctx context.Context, t *asynq.Task) error {
		start := time.Now().UnixNano()
		p := t.Payload()
		id := binary.LittleEndian.Uint64(p[0:8])
		due := int64(binary.LittleEndian.Uint64(p[8:16]))
		mu.Lock()
		pending = strconv.AppendUint(pending, id, 10)
		pending = append(pending, ' ')
		pending = strconv.AppendInt(pending, due, 10)
		pending = append(pending, ' ')
		pending = strconv.AppendInt(pending, start, 10)
		pending = append(pending, '\n')
		mu.Unlock()
		return nil
	}
	mux := asynq.NewServeMux()
	mux.HandleFunc(taskType, handler)
	srv := asynq.NewServer(asynq.RedisClientOpt{Addr: *addr}, asynq.Config{
		Concurrency:              *concurrency,
		DelayedTaskCheckInterval: *delayedInterval,
		TaskCheckInterval:        *taskCheckInterval,
		LogLevel:                 asynq.WarnLevel,
	})
	if err := srv.Start(mux); err != nil {
		fmt.Fprintln(os.Stderr, "worker start:", err)
		os.Exit(1)
	}
	out := bufio.NewWriterSize(os.Stdout, 1<<16)
	out.WriteString("READY\n")
	out.Flush()

	flush := func() {
		mu.Lock()
		b := pending
		pending = nil
		mu.Unlock()
		if len(b) > 0 {
			out.Write(b)
			out.Flush()
		}
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	tick := time.NewTicker(5 * time.Millisecond)
	for {
		select {
		case <-tick.C:
			flush()
		case <-stop:
			// Shutdown waits for running handlers, so the last flush
			// holds every task this server ran.
			srv.Shutdown()
			flush()
			return
		}
	}
}

// taskRun is one handler run reported by a worker.
type taskRun struct {
	id    uint64
	due   int64 // Unix ns
	start int64 // Unix ns
}

// result is the JSON line printed by the coordinator. Its keys match those of
// the BullMQ harness (bullmq/bench.js) so that table.py reads both.
type result struct {
	Peer                  string  `json:"peer"`
	Scenario              string  `json:"scenario"`
	Tasks                 int     `json:"tasks"`
	Workers               int     `json:"workers"`
	Concurrency           int     `json:"concurrency"`
	DelayedInterval       string  `json:"delayed_task_check_interval"`
	TaskCheckInterval     string  `json:"task_check_interval"`
	LoadAvg               string  `json:"loadavg"`
	EnqueueSeconds        float64 `json:"enqueue_s"`
	EnqueuePerSec         float64 `json:"enqueue_per_s"`
	EnqueueMode           string  `json:"enqueue_mode"`
	MaxEnqueueLagMs       float64 `json:"max_enqueue_lag_ms,omitempty"`
	WindowRedisCPUSeconds float64 `json:"window_redis_cpu_s"`
	WindowWallSeconds     float64 `json:"window_wall_s"`
	RedisCPUMicrosPerTask float64 `json:"redis_cpu_us_per_task"`
	RedisCoresUsed        float64 `json:"redis_cores_used"`
	FirstFireAfterDueMs   float64 `json:"first_fire_after_due_ms,omitempty"`
	SpanSeconds           float64 `json:"span_s,omitempty"`
	FiresPerSec           float64 `json:"fires_per_s,omitempty"`
	LateP50Ms             float64 `json:"late_p50_ms"`
	LateP99Ms             float64 `json:"late_p99_ms"`
	LateMaxMs             float64 `json:"late_max_ms"`
	Early                 int     `json:"early"`
	EarlyMaxMs            float64 `json:"early_max_ms"`
	Duplicates            int     `json:"duplicates"`
	Lost                  int     `json:"lost"`
	LeadSeconds           float64 `json:"lead_s"`
	Note                  string  `json:"note,omitempty"`
}

// redisCPUSeconds returns Redis's used_cpu_user + used_cpu_sys.
func redisCPUSeconds(ctx context.Context, rc *redis.Client) float64 {
	s, err := rc.Info(ctx, "cpu").Result()
	if err != nil {
		panic(err)
	}
	var user, sys float64
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "used_cpu_user:"); ok {
			user, _ = strconv.ParseFloat(v, 64)
		}
		if v, ok := strings.CutPrefix(line, "used_cpu_sys:"); ok {
			sys, _ = strconv.ParseFloat(v, 64)
		}
	}
	return user + sys
}

// percentile returns the nearest-rank p-th percentile of sorted values.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	if i < 0 {
		i = 0
	}
	return sorted[i]
}

// asynqVersion reports the asynq module version linked into this binary.
func asynqVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == "github.com/hibiken/asynq" {
				return m.Version
			}
		}
	}
	return "(unknown version)"
}

// workerPool is the set of worker processes and the runs they report.
type workerPool struct {
	cmds    []*exec.Cmd
	runs    chan taskRun
	readers sync.WaitGroup // one per worker stdout; done at EOF
}

// startWorkers starts n copies of this binary in the worker role and returns
// once every one has printed READY.
func startWorkers(n int, workerArgs []string) *workerPool {
	self, err := os.Executable()
	if err != nil {
		panic(err)
	}
	// Buffered so that runs reported during the steady producer phase,
	// before collection starts, do not block the workers' pipes.
	pool := &workerPool{runs: make(chan taskRun, 1<<16)}
	ready := make(chan struct{}, n)
	for range n {
		cmd := exec.Command(self, append([]string{"worker"}, workerArgs...)...)
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			panic(err)
		}
		if err := cmd.Start(); err != nil {
			panic(err)
		}
		pool.cmds = append(pool.cmds, cmd)
		pool.readers.Add(1)
		go func() {
			defer pool.readers.Done()
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				line := sc.Text()
				if line == "READY" {
					ready <- struct{}{}
					continue
				}
				f := strings.Fields(line)
				if len(f) != 3 {
					continue
				}
				id, _ := strconv.ParseUint(f[0], 10, 64)
				due, _ := strconv.ParseInt(f[1], 10, 64)
				start, _ := strconv.ParseInt(f[2], 10, 64)
				pool.runs <- taskRun{id, due, start}
			}
		}()
	}
	for range n {
		<-ready
	}
	return pool
}

// stop sends SIGTERM to every worker (killing any still alive after 15 s),
// passes every run they still report to handle, and reaps them.
func (p *workerPool) stop(handle func(taskRun)) {
	for _, c := range p.cmds {
		c.Process.Signal(syscall.SIGTERM)
	}
	kill := time.AfterFunc(15*time.Second, func() {
		for _, c := range p.cmds {
			c.Process.Kill()
		}
	})
	go func() {
		p.readers.Wait()
		close(p.runs)
	}()
	for r := range p.runs {
		handle(r)
	}
	kill.Stop()
	// Wait closes the pipes, so it comes after the readers reached EOF.
	for _, c := range p.cmds {
		c.Wait()
	}
}

// options are the coordinator's flags.
type options struct {
	scenario, addr                                       string
	workers, concurrency, rate, tasks, enqueueGoroutines int
	delayedInterval, taskCheckInterval                   time.Duration
	duration, lead, lostAfter, dupWait                   time.Duration
}

// parseFlags reads the coordinator's flags, exiting with status 2 on a bad
// one.
func parseFlags() options {
	var o options
	flag.StringVar(&o.scenario, "scenario", "steady", "steady|burst")
	flag.StringVar(&o.addr, "redis", "", "address of a private, empty redis-server (required)")
	flag.IntVar(&o.workers, "workers", 4, "worker processes, one asynq.Server each")
	flag.IntVar(&o.concurrency, "concurrency", 10, "asynq Config.Concurrency per worker")
	flag.DurationVar(&o.delayedInterval, "delayed-interval", 0, "asynq Config.DelayedTaskCheckInterval (0 = asynq default, 5s)")
	flag.DurationVar(&o.taskCheckInterval, "task-check-interval", 0, "asynq Config.TaskCheckInterval (0 = asynq default, 1s)")
	flag.IntVar(&o.rate, "rate", 2000, "steady: tasks coming due per second")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "steady: how long tasks come due")
	flag.DurationVar(&o.lead, "lead", 0, "steady: enqueue this long before due (0 = 3s); burst: the due instant is the next whole second at least this long after start (0 = 5s)")
	flag.IntVar(&o.tasks, "tasks", 100000, "burst: tasks due at the one instant")
	flag.IntVar(&o.enqueueGoroutines, "enqueue-goroutines", 16, "burst: goroutines calling Enqueue on the one Client")
	flag.DurationVar(&o.lostAfter, "lost-after", 60*time.Second, "a task not run this long after the last due time is lost")
	flag.DurationVar(&o.dupWait, "dup-wait", 2*time.Second, "after every task ran, keep listening this long for duplicates")
	flag.Parse()
	if o.addr == "" {
		fmt.Fprintln(os.Stderr, "-redis is required")
		os.Exit(2)
	}
	if o.scenario != "steady" && o.scenario != "burst" {
		fmt.Fprintln(os.Stderr, "unknown -scenario:", o.scenario)
		os.Exit(2)
	}
	if (o.scenario == "steady" && int64(o.rate)*int64(o.duration) < int64(time.Second)) || (o.scenario == "burst" && o.tasks < 1) {
		fmt.Fprintln(os.Stderr, "no tasks: check -tasks, -rate and -duration")
		os.Exit(2)
	}
	return o
}

// window is what a scenario's enqueue phase leaves for the measurement:
// every task's due time and where the measured window starts.
type window struct {
	dues     []int64 // Unix ns, indexed by task id
	cpuStart float64
	start    time.Time
}

func runCoordinator() {
	o := parseFlags()
	ctx := context.Background()
	loadavg, _ := os.ReadFile("/proc/loadavg")
	// Its own connection, used only for INFO cpu and the emptiness check.
	rc := redis.NewClient(&redis.Options{Addr: o.addr, PoolSize: 2})
	if size, err := rc.DBSize(ctx).Result(); err != nil || size != 0 {
		fmt.Fprintln(os.Stderr, "redis not empty or unreachable:", size, err)
		os.Exit(1)
	}

	pool := startWorkers(o.workers, []string{"-redis", o.addr, "-concurrency", strconv.Itoa(o.concurrency),
		"-delayed-interval", o.delayedInterval.String(), "-task-check-interval", o.taskCheckInterval.String()})
	time.Sleep(1 * time.Second) // let the servers settle: heartbeats registered, loops idle

	client := asynq.NewClient(asynq.RedisClientOpt{Addr: o.addr})
	res := newResult(o, strings.TrimSpace(string(loadavg)))
	var w window
	switch o.scenario {
	case "steady":
		w = runSteady(ctx, o, rc, client, &res)
	case "burst":
		w = runBurst(ctx, o, rc, client, &res)
	}
	total := len(w.dues)
	res.Tasks = total

	t := newTally(total)
	t.collect(pool.runs, time.Until(time.Unix(0, w.dues[total-1]).Add(o.lostAfter)))
	cpuEnd := redisCPUSeconds(ctx, rc)
	windowEnd := time.Now()
	t.listen(pool.runs, o.dupWait)
	pool.stop(t.handle)

	res.WindowRedisCPUSeconds = cpuEnd - w.cpuStart
	res.WindowWallSeconds = windowEnd.Sub(w.start).Seconds()
	res.RedisCPUMicrosPerTask = res.WindowRedisCPUSeconds * 1e6 / float64(total)
	res.RedisCoresUsed = res.WindowRedisCPUSeconds / res.WindowWallSeconds
	t.summarize(&res, w.dues, o.scenario == "burst")
	b, _ := json.Marshal(res)
	fmt.Println(string(b))
}

// newResult returns the result's description of the run.
func newResult(o options, loadavg string) result {
	res := result{
		Peer: "asynq " + asynqVersion(), Scenario: o.scenario, Workers: o.workers, Concurrency: o.concurrency,
		DelayedInterval: "5s (default)", TaskCheckInterval: "1s (default)", LoadAvg: loadavg,
	}
	if o.delayedInterval != 0 {
		res.DelayedInterval = o.delayedInterval.String()
	}
	if o.taskCheckInterval != 0 {
		res.TaskCheckInterval = o.taskCheckInterval.String()
	}
	return res
}

// runSteady enqueues the steady scenario's tasks, each -lead before it is
// due; its window starts just before the first enqueue.
func runSteady(ctx context.Context, o options, rc *redis.Client, client *asynq.Client, res *result) window {
	lead := o.lead
	if lead == 0 {
		lead = 3 * time.Second
	}
	total := int(int64(o.rate) * int64(o.duration) / int64(time.Second))
	res.LeadSeconds = lead.Seconds()
	res.EnqueueMode = "client.Enqueue(task, asynq.ProcessAt(due)), one call per task, sequential, producer wakes every 2 ms"
	// Dues on whole milliseconds, as in timerbench steady; the 50 ms
	// leaves time to read INFO cpu before the first enqueue.
	firstDueMs := time.Now().Add(50*time.Millisecond).UnixMilli() + lead.Milliseconds()
	dues := make([]int64, total)
	for i := range dues {
		dues[i] = (firstDueMs + int64(i)*1000/int64(o.rate)) * int64(time.Millisecond)
	}
	w := window{dues: dues, cpuStart: redisCPUSeconds(ctx, rc), start: time.Now()}
	next := 0
	var maxLag time.Duration
	for next < total {
		now := time.Now()
		for next < total && dues[next]-int64(lead) <= now.UnixNano() {
			task := asynq.NewTask(taskType, encodePayload(uint64(next), dues[next]))
			if _, err := client.Enqueue(task, asynq.ProcessAt(time.Unix(0, dues[next]))); err != nil {
				panic(err)
			}
			// How far this enqueue finished behind its plan (due − lead).
			if lag := time.Since(time.Unix(0, dues[next]-int64(lead))); lag > maxLag {
				maxLag = lag
			}
			next++
		}
		time.Sleep(2 * time.Millisecond)
	}
	res.EnqueueSeconds = time.Since(w.start).Seconds()
	res.EnqueuePerSec = float64(total) / res.EnqueueSeconds
	res.MaxEnqueueLagMs = float64(maxLag) / 1e6
	return w
}

// runBurst enqueues the burst scenario's tasks, all due at one whole
// second; its window starts at that instant.
func runBurst(ctx context.Context, o options, rc *redis.Client, client *asynq.Client, res *result) window {
	lead := o.lead
	if lead == 0 {
		lead = 5 * time.Second
	}
	total := o.tasks
	// asynq stores scheduled times in whole seconds, so an instant
	// inside a second would let it fire the burst early (README,
	// caveats); both harnesses put the instant on a whole second.
	dueAt := time.Now().Add(lead).Truncate(time.Second).Add(time.Second)
	res.LeadSeconds = time.Until(dueAt).Seconds()
	due := dueAt.UnixNano()
	dues := make([]int64, total)
	for i := range dues {
		dues[i] = due
	}
	res.EnqueueMode = fmt.Sprintf("client.Enqueue(task, asynq.ProcessAt(due)), one call per task, %d goroutines sharing one asynq.Client (asynq has no bulk enqueue)", o.enqueueGoroutines)
	enqueueStart := time.Now()
	var nextID atomic.Int64
	var wg sync.WaitGroup
	for range o.enqueueGoroutines {
		wg.Go(func() {
			for {
				i := nextID.Add(1) - 1
				if i >= int64(total) {
					return
				}
				task := asynq.NewTask(taskType, encodePayload(uint64(i), due))
				if _, err := client.Enqueue(task, asynq.ProcessAt(dueAt)); err != nil {
					panic(err)
				}
			}
		})
	}
	wg.Wait()
	res.EnqueueSeconds = time.Since(enqueueStart).Seconds()
	res.EnqueuePerSec = float64(total) / res.EnqueueSeconds
	if time.Until(dueAt) < 200*time.Millisecond {
		res.Note = fmt.Sprintf("enqueue ended only %v before the due instant: raise -lead", time.Until(dueAt))
	}
	time.Sleep(time.Until(dueAt))
	return window{dues: dues, cpuStart: redisCPUSeconds(ctx, rc), start: time.Now()}
}

// tally counts, per task, how often it ran and when it first started.
type tally struct {
	firstStart                 []int64
	runs                       []int32
	seen                       int
	earliestStart, latestStart int64
}

func newTally(total int) *tally {
	return &tally{firstStart: make([]int64, total), runs: make([]int32, total), earliestStart: math.MaxInt64}
}

// handle counts one run.
func (t *tally) handle(r taskRun) {
	if r.id >= uint64(len(t.runs)) {
		return
	}
	t.runs[r.id]++
	if t.runs[r.id] == 1 {
		t.firstStart[r.id] = r.start
		t.seen++
		t.latestStart = max(t.latestStart, r.start)
		t.earliestStart = min(t.earliestStart, r.start)
	}
}

// collect counts runs until every task has run, or for at most lostAfter.
func (t *tally) collect(runs <-chan taskRun, lostAfter time.Duration) {
	lostDeadline := time.After(lostAfter)
	for t.seen < len(t.runs) {
		select {
		case r := <-runs:
			t.handle(r)
		case <-lostDeadline:
			return
		}
	}
}

// listen counts the runs that come in d, the duplicates.
func (t *tally) listen(runs <-chan taskRun, d time.Duration) {
	dupDeadline := time.After(d)
	for {
		select {
		case r := <-runs:
			t.handle(r)
		case <-dupDeadline:
			return
		}
	}
}

// summarize fills in res's losses, duplicates, lateness and, for a burst,
// its span.
func (t *tally) summarize(res *result, dues []int64, burst bool) {
	var lateness []float64 // ms, signed
	for i, n := range t.runs {
		switch {
		case n == 0:
			res.Lost++
			continue
		case n > 1:
			res.Duplicates += int(n - 1)
		}
		late := float64(t.firstStart[i]-dues[i]) / 1e6
		if late < 0 {
			res.Early++
			res.EarlyMaxMs = max(res.EarlyMaxMs, -late)
		}
		lateness = append(lateness, late)
	}
	sort.Float64s(lateness)
	res.LateP50Ms, res.LateP99Ms = percentile(lateness, 0.50), percentile(lateness, 0.99)
	if len(lateness) > 0 {
		res.LateMaxMs = lateness[len(lateness)-1]
	}
	if burst && t.seen > 0 {
		total := len(dues)
		res.SpanSeconds = float64(t.latestStart-dues[0]) / 1e9
		res.FiresPerSec = float64(total) / res.SpanSeconds
		res.FirstFireAfterDueMs = float64(t.earliestStart-dues[0]) / 1e6
	}
}
