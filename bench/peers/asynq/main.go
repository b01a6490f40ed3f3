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

func runCoordinator() {
	scenario := flag.String("scenario", "steady", "steady|burst")
	addr := flag.String("redis", "", "address of a private, empty redis-server (required)")
	workers := flag.Int("workers", 4, "worker processes, one asynq.Server each")
	concurrency := flag.Int("concurrency", 10, "asynq Config.Concurrency per worker")
	delayedInterval := flag.Duration("delayed-interval", 0, "asynq Config.DelayedTaskCheckInterval (0 = asynq default, 5s)")
	taskCheckInterval := flag.Duration("task-check-interval", 0, "asynq Config.TaskCheckInterval (0 = asynq default, 1s)")
	rate := flag.Int("rate", 2000, "steady: tasks coming due per second")
	duration := flag.Duration("duration", 10*time.Second, "steady: how long tasks come due")
	lead := flag.Duration("lead", 0, "steady: enqueue this long before due (0 = 3s); burst: the due instant is the next whole second at least this long after start (0 = 5s)")
	tasks := flag.Int("tasks", 100000, "burst: tasks due at the one instant")
	enqueueGoroutines := flag.Int("enqueue-goroutines", 16, "burst: goroutines calling Enqueue on the one Client")
	lostAfter := flag.Duration("lost-after", 60*time.Second, "a task not run this long after the last due time is lost")
	dupWait := flag.Duration("dup-wait", 2*time.Second, "after every task ran, keep listening this long for duplicates")
	flag.Parse()
	if *addr == "" {
		fmt.Fprintln(os.Stderr, "-redis is required")
		os.Exit(2)
	}
	if *scenario != "steady" && *scenario != "burst" {
		fmt.Fprintln(os.Stderr, "unknown -scenario:", *scenario)
		os.Exit(2)
	}
	if (*scenario == "steady" && int64(*rate)*int64(*duration) < int64(time.Second)) || (*scenario == "burst" && *tasks < 1) {
		fmt.Fprintln(os.Stderr, "no tasks: check -tasks, -rate and -duration")
		os.Exit(2)
	}

	ctx := context.Background()
	loadavg, _ := os.ReadFile("/proc/loadavg")
	// Its own connection, used only for INFO cpu and the emptiness check.
	rc := redis.NewClient(&redis.Options{Addr: *addr, PoolSize: 2})
	if size, err := rc.DBSize(ctx).Result(); err != nil || size != 0 {
		fmt.Fprintln(os.Stderr, "redis not empty or unreachable:", size, err)
		os.Exit(1)
	}

	pool := startWorkers(*workers, []string{"-redis", *addr, "-concurrency", strconv.Itoa(*concurrency),
		"-delayed-interval", delayedInterval.String(), "-task-check-interval", taskCheckInterval.String()})
	time.Sleep(1 * time.Second) // let the servers settle: heartbeats registered, loops idle

	client := asynq.NewClient(asynq.RedisClientOpt{Addr: *addr})
	res := result{
		Peer: "asynq " + asynqVersion(), Scenario: *scenario, Workers: *workers, Concurrency: *concurrency,
		DelayedInterval: "5s (default)", TaskCheckInterval: "1s (default)", LoadAvg: strings.TrimSpace(string(loadavg)),
	}
	if *delayedInterval != 0 {
		res.DelayedInterval = delayedInterval.String()
	}
	if *taskCheckInterval != 0 {
		res.TaskCheckInterval = taskCheckInterval.String()
	}

	var dues []int64 // Unix ns, indexed by task id
	var cpuStart float64
	var windowStart time.Time
	switch *scenario {
	case "steady":
		if *lead == 0 {
			*lead = 3 * time.Second
		}
		total := int(int64(*rate) * int64(*duration) / int64(time.Second))
		res.LeadSeconds = lead.Seconds()
		res.EnqueueMode = "client.Enqueue(task, asynq.ProcessAt(due)), one call per task, sequential, producer wakes every 2 ms"
		// Dues on whole milliseconds, as in timerbench steady; the 50 ms
		// leaves time to read INFO cpu before the first enqueue.
		firstDueMs := time.Now().Add(50*time.Millisecond).UnixMilli() + lead.Milliseconds()
		dues = make([]int64, total)
		for i := range dues {
			dues[i] = (firstDueMs + int64(i)*1000/int64(*rate)) * int64(time.Millisecond)
		}
		cpuStart = redisCPUSeconds(ctx, rc)
		windowStart = time.Now()
		next := 0
		var maxLag time.Duration
		for next < total {
			now := time.Now()
			for next < total && dues[next]-int64(*lead) <= now.UnixNano() {
				task := asynq.NewTask(taskType, encodePayload(uint64(next), dues[next]))
				if _, err := client.Enqueue(task, asynq.ProcessAt(time.Unix(0, dues[next]))); err != nil {
					panic(err)
				}
				// How far this enqueue finished behind its plan (due − lead).
				if lag := time.Since(time.Unix(0, dues[next]-int64(*lead))); lag > maxLag {
					maxLag = lag
				}
				next++
			}
			time.Sleep(2 * time.Millisecond)
		}
		res.EnqueueSeconds = time.Since(windowStart).Seconds()
		res.EnqueuePerSec = float64(total) / res.EnqueueSeconds
		res.MaxEnqueueLagMs = float64(maxLag) / 1e6
	case "burst":
		if *lead == 0 {
			*lead = 5 * time.Second
		}
		total := *tasks
		// asynq stores scheduled times in whole seconds, so an instant
		// inside a second would let it fire the burst early (README,
		// caveats); both harnesses put the instant on a whole second.
		dueAt := time.Now().Add(*lead).Truncate(time.Second).Add(time.Second)
		res.LeadSeconds = time.Until(dueAt).Seconds()
		due := dueAt.UnixNano()
		dues = make([]int64, total)
		for i := range dues {
			dues[i] = due
		}
		res.EnqueueMode = fmt.Sprintf("client.Enqueue(task, asynq.ProcessAt(due)), one call per task, %d goroutines sharing one asynq.Client (asynq has no bulk enqueue)", *enqueueGoroutines)
		enqueueStart := time.Now()
		var nextID atomic.Int64
		var wg sync.WaitGroup
		for range *enqueueGoroutines {
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
		cpuStart = redisCPUSeconds(ctx, rc)
		windowStart = time.Now()
	}
	total := len(dues)
	res.Tasks = total
	lastDue := dues[total-1]

	// Per task: how often it ran and when it first started.
	firstStart := make([]int64, total)
	runs := make([]int32, total)
	seen := 0
	var earliestStart, latestStart int64 = math.MaxInt64, 0
	handle := func(r taskRun) {
		if r.id >= uint64(total) {
			return
		}
		runs[r.id]++
		if runs[r.id] == 1 {
			firstStart[r.id] = r.start
			seen++
			latestStart = max(latestStart, r.start)
			earliestStart = min(earliestStart, r.start)
		}
	}
	lostDeadline := time.After(time.Until(time.Unix(0, lastDue).Add(*lostAfter)))
collect:
	for seen < total {
		select {
		case r := <-pool.runs:
			handle(r)
		case <-lostDeadline:
			break collect
		}
	}
	cpuEnd := redisCPUSeconds(ctx, rc)
	windowEnd := time.Now()
	dupDeadline := time.After(*dupWait)
listenForDuplicates:
	for {
		select {
		case r := <-pool.runs:
			handle(r)
		case <-dupDeadline:
			break listenForDuplicates
		}
	}
	pool.stop(handle)

	res.WindowRedisCPUSeconds = cpuEnd - cpuStart
	res.WindowWallSeconds = windowEnd.Sub(windowStart).Seconds()
	res.RedisCPUMicrosPerTask = res.WindowRedisCPUSeconds * 1e6 / float64(total)
	res.RedisCoresUsed = res.WindowRedisCPUSeconds / res.WindowWallSeconds
	var lateness []float64 // ms, signed
	for i := range total {
		switch {
		case runs[i] == 0:
			res.Lost++
			continue
		case runs[i] > 1:
			res.Duplicates += int(runs[i] - 1)
		}
		late := float64(firstStart[i]-dues[i]) / 1e6
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
	if *scenario == "burst" && seen > 0 {
		res.SpanSeconds = float64(latestStart-dues[0]) / 1e9
		res.FiresPerSec = float64(total) / res.SpanSeconds
		res.FirstFireAfterDueMs = float64(earliestStart-dues[0]) / 1e6
	}
	b, _ := json.Marshal(res)
	fmt.Println(string(b))
}
