package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/queue"
)

// ClusterConfig configures the cluster scenario, which starts its own Redis
// Cluster: a burst over a sharded namespace, then the idle cost of a worker
// as the shard count grows.
type ClusterConfig struct {
	Masters   int           `flag:"cluster" default:"3" usage:"masters of the Cluster to start"`
	Shards    int           `flag:"shards" default:"16" usage:"shards of the burst namespace"`
	Timers    int           `flag:"timers" default:"100_000" usage:"timers due at one instant"`
	Lead      time.Duration `flag:"lead" default:"5s" usage:"how far ahead the instant is"`
	Workers   int           `flag:"workers" default:"2" usage:"timerworker processes"`
	BatchSize int           `flag:"batch-size" default:"256" usage:"the workers' --batch-size"`
	// IdleShards lists the shard counts whose idle cost is measured, with
	// one worker and with two and nothing scheduled. Empty skips that part.
	IdleShards  []int         `flag:"idle-shards" cli:"1,4,16,64" usage:"shard counts whose idle cost is measured (empty: none)"`
	IdleFor     time.Duration `flag:"idle-for" default:"5s" usage:"how long each idle measurement lasts"`
	RedisServer string        `flag:"redis-server" default:"redis-server" usage:"redis-server binary"`
	WorkerBin   string        `flag:"worker-bin" usage:"timerworker binary (empty: go build one into a temporary directory)"`
	// Log receives progress lines. Default io.Discard.
	Log io.Writer
}

// ClusterResult is what the cluster scenario measured.
type ClusterResult struct {
	Scenario  string `json:"scenario"`
	Load      string `json:"load"`
	Masters   int    `json:"masters"`
	Shards    int    `json:"shards"`
	Timers    int    `json:"timers"`
	Workers   int    `json:"workers"`
	BatchSize int    `json:"batch_size"`
	// FiresPerSec is Timers over the time from the due instant to the last
	// fire, by the server clock.
	FiresPerSec   float64 `json:"fires_per_sec"`
	LatenessP50Ms int64   `json:"lateness_p50_ms"`
	LatenessP99Ms int64   `json:"lateness_p99_ms"`
	LatenessMaxMs int64   `json:"lateness_max_ms"`
	Lost          int64   `json:"lost"`
	Duplicates    int64   `json:"duplicates"`
	Early         int64   `json:"early"`
	// RedisCPUUsPerFire is every master's CPU (INFO cpu, user+sys) from the
	// due instant to the last fire, over Timers, in microseconds.
	RedisCPUUsPerFire float64 `json:"redis_cpu_us_per_fire"`
	// Balance is the smallest master's share of the fires over the largest's.
	Balance float64        `json:"balance"`
	Nodes   []ClusterNode  `json:"nodes"`
	Idle    []IdleMeasured `json:"idle"`
}

// ClusterNode is one master's part of the burst.
type ClusterNode struct {
	Addr         string  `json:"addr"`
	Shards       int     `json:"shards"`
	Fires        int64   `json:"fires"`
	Share        float64 `json:"share"`
	CPUSec       float64 `json:"cpu_sec"`
	CPUUsPerFire float64 `json:"cpu_us_per_fire"`
	CPUOfOneCore float64 `json:"cpu_of_one_core"`
}

// IdleMeasured is the Redis commands per second that idle workers cause.
// INFO commandstats counts the commands a script runs as well as the
// script call, so ScriptsPerSec (EVALSHA and EVAL: round trips) is the
// figure to compare; CommandsPerSec includes what the scripts run inside.
type IdleMeasured struct {
	Shards                 int     `json:"shards"`
	Workers                int     `json:"workers"`
	ScriptsPerSec          float64 `json:"scripts_per_sec"`
	ScriptsPerWorkerPerSec float64 `json:"scripts_per_worker_per_sec"`
	CommandsPerSec         float64 `json:"commands_per_sec"`
	PerWorkerPerSec        float64 `json:"per_worker_per_sec"`
	OwnedPerWorkerMax      int     `json:"owned_per_worker_max"`
	// Commands is the rate of each command, summed over the masters.
	Commands string `json:"commands"`
}

// benchCluster is a Redis Cluster the scenario started.
type benchCluster struct {
	addrs []string
	cmds  []*exec.Cmd
	done  []chan struct{}
	// nodes are clients of each master, for INFO, made on first use so
	// that a reading at the due instant does not wait for a dial.
	nodes []*redis.Client
}

// Cluster runs the cluster scenario.
func Cluster(ctx context.Context, cfg ClusterConfig) (_ *ClusterResult, err error) {
	withDefaults(&cfg)
	cfg.Log = cmp.Or(cfg.Log, io.Discard)
	if cfg.Masters < 1 || cfg.Masters > 16 || cfg.Shards < 1 || cfg.Shards > queue.MaxShards {
		return nil, fmt.Errorf("bench: --cluster %d (1..16) or --shards %d (1..%d) out of range", cfg.Masters, cfg.Shards, queue.MaxShards)
	}
	e := &Env{cfg: Config{Log: cfg.Log, BatchSize: cfg.BatchSize, Workers: cfg.Workers}, workers: cfg.WorkerBin}
	e.tmpDir, err = os.MkdirTemp("", "timerbench-cluster-")
	if err != nil {
		return nil, fmt.Errorf("bench: temporary directory: %w", err)
	}
	defer os.RemoveAll(e.tmpDir)
	bc, err := startBenchCluster(ctx, cfg, e.tmpDir)
	if bc != nil {
		defer bc.stop()
	}
	if err != nil {
		return nil, err
	}
	e.logf("cluster: %d masters at %v", cfg.Masters, bc.addrs)
	e.url = "redis://" + bc.addrs[0] + "?cluster=1"
	for _, a := range bc.addrs[1:] {
		e.url += "&addr=" + a
	}
	// Built as an application should (queue.ReloadOnFailover), like the
	// timerworkers' clients (cliconf.NewClient).
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: bc.addrs, ReadTimeout: time.Minute,
		ClusterStateReloadInterval: queue.ClusterStateReloadInterval})
	queue.ReloadOnFailover(rdb)
	defer rdb.Close()

	r := &ClusterResult{Scenario: "cluster", Load: loadAvg(), Masters: cfg.Masters, Shards: cfg.Shards,
		Timers: cfg.Timers, Workers: cfg.Workers, BatchSize: cfg.BatchSize}
	if err := clusterBurst(ctx, e, cfg, bc, rdb, r); err != nil {
		return nil, err
	}
	for _, s := range cfg.IdleShards {
		for _, w := range []int{1, 2} {
			m, err := clusterIdle(ctx, e, cfg, bc, rdb, s, w)
			if err != nil {
				return nil, err
			}
			r.Idle = append(r.Idle, *m)
		}
	}
	return r, nil
}

func clusterBurst(ctx context.Context, e *Env, cfg ClusterConfig, bc *benchCluster, rdb *redis.ClusterClient, r *ClusterResult) error {
	ns := "burst"
	if _, err := queue.CreateNamespace(ctx, rdb, ns, cfg.Shards); err != nil {
		return err
	}
	q, err := queue.New(rdb, queue.Options{Namespace: ns})
	if err != nil {
		return err
	}
	defer q.Close()
	ws, err := startClusterWorkers(ctx, e, rdb, ns, cfg.Shards, cfg.Workers)
	if err != nil {
		return err
	}
	defer ws.stop()
	due, open, err := scheduleBurst(ctx, e, cfg, q, rdb)
	if err != nil {
		return err
	}
	streams := make([]string, cfg.Shards)
	for k := range streams {
		streams[k] = q.Keys().Stream(k)
	}
	cpu0, cpu1, err := burstCPU(ctx, bc, rdb, streams, open, cfg.Timers)
	if err != nil {
		return err
	}
	f, err := readBurstFires(ctx, bc, rdb, streams, cfg.Timers, r)
	if err != nil {
		return err
	}
	span := burstSummary(r, cfg.Timers, due, f, cpu0, cpu1)
	e.logf("cluster: %d fired in %.2fs: %.0f/s, p99 lateness %d ms, balance %.2f", cfg.Timers, span, r.FiresPerSec, r.LatenessP99Ms, r.Balance)
	return nil
}

// scheduleBurst schedules the burst's timers, all due at one instant
// cfg.Lead away by the server's clock, and returns that instant and when
// the CPU window opens.
func scheduleBurst(ctx context.Context, e *Env, cfg ClusterConfig, q *queue.Queue, rdb *redis.ClusterClient) (due, open time.Time, err error) {
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		return due, open, err
	}
	due = now.Add(cfg.Lead).Truncate(time.Millisecond)
	e.logf("cluster: scheduling %d timers over %d shards, due in %v", cfg.Timers, cfg.Shards, cfg.Lead)
	if _, err := scheduleAll(ctx, q, cfg.Timers, 1, func(i int) queue.NewTimer {
		return queue.NewTimer{ID: fmt.Sprintf("b-%08d", i), Due: due, Payload: payload16}
	}); err != nil {
		return due, open, err
	}
	now, _ = rdb.Time(ctx).Result()
	if now.After(due) {
		return due, open, fmt.Errorf("bench: scheduling took past the due instant; raise --lead")
	}
	return due, time.Now().Add(due.Sub(now) - 100*time.Millisecond), nil
}

// burstCPU waits for open, then for every timer to fire, and returns each
// master's CPU seconds at both ends.
//
// CPU from the due instant (by the server's clock) to the last fire.
// Nothing of the bench's runs in that window but one XLEN per shard
// every 20 ms, pipelined per master, to see the last fire: not Stats,
// a script per shard, which at 16 shards cost about 3 us per fire.
// The window opens a little before the instant, so that a loaded
// machine's late wake-up does not miss the first fires; the workers'
// idle claims in that margin cost next to nothing.
func burstCPU(ctx context.Context, bc *benchCluster, rdb *redis.ClusterClient, streams []string, open time.Time, timers int) (cpu0, cpu1 []float64, err error) {
	if _, err := bc.cpu(ctx); err != nil { // dials each master
		return nil, nil, err
	}
	time.Sleep(time.Until(open))
	if cpu0, err = bc.cpu(ctx); err != nil {
		return nil, nil, err
	}
	if n, err := firedCount(ctx, rdb, streams); err != nil || n > 0 {
		if err != nil {
			return nil, nil, fmt.Errorf("bench: counting fires when the CPU window opened: %w", err)
		}
		return nil, nil, fmt.Errorf("bench: %d timers had fired when the CPU window opened: %w", n, ErrTooLoaded)
	}
	err = waitUntil(ctx, 60*time.Second+time.Duration(timers/2000)*time.Second, 20*time.Millisecond, func() (bool, error) {
		n, err := firedCount(ctx, rdb, streams)
		return err == nil && n >= int64(timers), err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("bench: waiting for %d fires: %w", timers, err)
	}
	cpu1, err = bc.cpu(ctx)
	return cpu0, cpu1, err
}

// burstFires is what the fire streams of a burst held.
type burstFires struct {
	lat      []int64 // lateness of each first fire, ms
	lastFire int64   // Unix ms
	seen     map[string]int
}

// readBurstFires reads every shard's fire stream into r (which master
// serves it, duplicates, early fires, fires per master) and returns the
// lateness of each fire.
func readBurstFires(ctx context.Context, bc *benchCluster, rdb *redis.ClusterClient, streams []string, timers int, r *ClusterResult) (*burstFires, error) {
	// Which master serves each shard, and what each shard fired.
	nodeOf := map[string]int{}
	r.Nodes = make([]ClusterNode, len(bc.addrs))
	for i, a := range bc.addrs {
		nodeOf[a], r.Nodes[i].Addr = i, a
	}
	f := &burstFires{seen: make(map[string]int, timers)}
	for _, stream := range streams {
		node, err := rdb.MasterForKey(ctx, stream)
		if err != nil {
			return nil, err
		}
		n := &r.Nodes[nodeOf[node.Options().Addr]]
		n.Shards++
		if err := f.readStream(ctx, rdb, stream, n, r); err != nil {
			return nil, err
		}
	}
	r.Lost = int64(timers - len(f.seen))
	return f, nil
}

// readStream reads one fire stream, counting its fires on n.
func (f *burstFires) readStream(ctx context.Context, rdb *redis.ClusterClient, stream string, n *ClusterNode, r *ClusterResult) error {
	return eachFire(ctx, rdb, stream, func(_ string, ev fireEvent) {
		f.seen[ev.id]++
		if f.seen[ev.id] > 1 {
			r.Duplicates++
			return
		}
		if ev.fired < ev.due {
			r.Early++
		}
		f.lat = append(f.lat, ev.fired-ev.due)
		f.lastFire = max(f.lastFire, ev.fired)
		n.Fires++
	})
}

// burstSummary fills in r's rates, lateness and each master's CPU and
// share, and returns the seconds from the due instant to the last fire.
func burstSummary(r *ClusterResult, timers int, due time.Time, f *burstFires, cpu0, cpu1 []float64) float64 {
	lat := f.lat
	slices.Sort(lat)
	span := float64(f.lastFire-due.UnixMilli()) / 1000
	if span > 0 {
		r.FiresPerSec = math.Round(float64(timers) / span)
	}
	r.LatenessP50Ms, r.LatenessP99Ms, r.LatenessMaxMs = pct(lat, 0.5), pct(lat, 0.99), lat[len(lat)-1]
	var totalCPU float64
	lo, hi := math.Inf(1), 0.0
	for i := range r.Nodes {
		n := &r.Nodes[i]
		n.CPUSec = round3(cpu1[i] - cpu0[i])
		totalCPU += cpu1[i] - cpu0[i]
		n.Share = round3(float64(n.Fires) / float64(timers))
		if n.Fires > 0 {
			n.CPUUsPerFire = round1((cpu1[i] - cpu0[i]) * 1e6 / float64(n.Fires))
		}
		if span > 0 {
			n.CPUOfOneCore = round3((cpu1[i] - cpu0[i]) / span)
		}
		lo, hi = min(lo, n.Share), max(hi, n.Share)
	}
	if hi > 0 {
		r.Balance = round3(lo / hi)
	}
	r.RedisCPUUsPerFire = round1(totalCPU * 1e6 / float64(timers))
	return span
}

// firedCount sums the lengths of the fire streams, one XLEN each in one
// pipeline (one per master on a Cluster).
func firedCount(ctx context.Context, rdb redis.UniversalClient, streams []string) (int64, error) {
	cmds := make([]*redis.IntCmd, len(streams))
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, s := range streams {
			cmds[i] = p.XLen(ctx, s)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	var n int64
	for _, c := range cmds {
		n += c.Val()
	}
	return n, nil
}

// clusterIdle measures the commands per second that workers idling over an
// empty namespace of shards shards cause, from INFO commandstats.
func clusterIdle(ctx context.Context, e *Env, cfg ClusterConfig, bc *benchCluster, rdb *redis.ClusterClient, shards, workers int) (*IdleMeasured, error) {
	ns := fmt.Sprintf("idle-%d-%d", shards, workers)
	if _, err := queue.CreateNamespace(ctx, rdb, ns, shards); err != nil {
		return nil, err
	}
	ws, err := startClusterWorkers(ctx, e, rdb, ns, shards, workers)
	if err != nil {
		return nil, err
	}
	defer ws.stop()
	time.Sleep(3 * time.Second) // memberships settle, maintenance lock taken
	b0, err := bc.callsBy(ctx)
	if err != nil {
		return nil, err
	}
	time.Sleep(cfg.IdleFor)
	b1, err := bc.callsBy(ctx)
	if err != nil {
		return nil, err
	}
	var c0, c1, scripts int64
	var top []string
	for cmd, n := range b1 {
		c0 += b0[cmd]
		c1 += n
		if cmd == "evalsha" || cmd == "eval" {
			scripts += n - b0[cmd]
		}
		if d := n - b0[cmd]; d > 0 {
			top = append(top, fmt.Sprintf("%s=%.1f/s", cmd, float64(d)/cfg.IdleFor.Seconds()))
		}
	}
	slices.Sort(top)
	// Our own INFO calls are not the workers'.
	per := (float64(c1-c0) - float64(len(bc.addrs))) / cfg.IdleFor.Seconds()
	m := &IdleMeasured{Shards: shards, Workers: workers, CommandsPerSec: round1(per), PerWorkerPerSec: round1(per / float64(workers)),
		OwnedPerWorkerMax: (shards + workers - 1) / workers}
	m.Commands = strings.Join(top, " ")
	m.ScriptsPerSec = round1(float64(scripts) / cfg.IdleFor.Seconds())
	m.ScriptsPerWorkerPerSec = round1(m.ScriptsPerSec / float64(workers))
	e.logf("cluster: idle, %d shards, %d workers: %.1f commands/s (%s)", shards, workers, per, m.Commands)
	return m, nil
}

// startClusterWorkers starts n workers on the namespace ns of shards
// shards and returns once each is a member of it, or (unsharded, without
// membership) subscribed to its wake channel.
func startClusterWorkers(ctx context.Context, e *Env, rdb *redis.ClusterClient, ns string, shards, n int) (*workers, error) {
	e.cfg.Namespace = ns
	ws, err := e.startWorkers(ctx, n, func(n int) (bool, error) {
		if shards == 1 {
			s, err := subscribers(ctx, rdb, keyspace.Shard(ns, 0, 1).Wake())
			return s >= n, err
		}
		m, err := rdb.ZCard(ctx, keyspace.Namespace(ns).Workers()).Result()
		return m >= int64(n), err
	})
	if err == nil {
		time.Sleep(time.Second) // one more heartbeat: everyone sees everyone
	}
	return ws, err
}

func startBenchCluster(ctx context.Context, cfg ClusterConfig, tmp string) (*benchCluster, error) {
	path, err := exec.LookPath(cfg.RedisServer)
	if err != nil {
		return nil, fmt.Errorf("bench: %w; install redis-server or pass --redis-server", err)
	}
	if _, err := exec.LookPath("redis-cli"); err != nil && cfg.Masters >= 3 {
		return nil, fmt.Errorf("bench: %w; install redis-tools", err)
	}
	bc := &benchCluster{}
	for i := range cfg.Masters {
		dir := filepath.Join(tmp, fmt.Sprint("node", i))
		port, args, err := serverArgs(dir)
		if err != nil {
			return bc, err
		}
		cmd := exec.Command(path, append(args, "--appendonly", "no",
			"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"))...)
		if err := cmd.Start(); err != nil {
			return bc, err
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		bc.cmds, bc.done = append(bc.cmds, cmd), append(bc.done, done)
		bc.addrs = append(bc.addrs, fmt.Sprintf("127.0.0.1:%d", port))
	}
	for _, a := range bc.addrs {
		c := redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1})
		err := waitUntil(ctx, 10*time.Second, 10*time.Millisecond, func() (bool, error) { return c.Ping(ctx).Err() == nil, nil })
		c.Close()
		if err != nil {
			return bc, fmt.Errorf("bench: redis-server at %s did not start: %w", a, err)
		}
	}
	if cfg.Masters >= 3 {
		args := append([]string{"--cluster", "create"}, bc.addrs...)
		args = append(args, "--cluster-replicas", "0", "--cluster-yes")
		if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil {
			return bc, fmt.Errorf("bench: redis-cli --cluster create: %w: %s", err, out)
		}
	} else {
		per := 16384 / cfg.Masters
		for i, a := range bc.addrs {
			c := redis.NewClient(&redis.Options{Addr: a})
			hi := (i+1)*per - 1
			if i == cfg.Masters-1 {
				hi = 16383
			}
			err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", i*per, hi).Err()
			if err == nil && i > 0 {
				h, p, _ := strings.Cut(bc.addrs[0], ":")
				err = c.ClusterMeet(ctx, h, p).Err()
			}
			c.Close()
			if err != nil {
				return bc, fmt.Errorf("bench: assigning slots to %s: %w", a, err)
			}
		}
	}
	for _, a := range bc.addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		err := waitUntil(ctx, 30*time.Second, 50*time.Millisecond, func() (bool, error) {
			info, err := c.ClusterInfo(ctx).Result()
			return err == nil && strings.Contains(info, "cluster_state:ok") &&
				strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d\r", cfg.Masters)), nil
		})
		c.Close()
		if err != nil {
			return bc, fmt.Errorf("bench: cluster not ok at %s: %w", a, err)
		}
	}
	return bc, nil
}

// cpu returns each master's used_cpu_user+used_cpu_sys.
func (bc *benchCluster) cpu(ctx context.Context) ([]float64, error) {
	if bc.nodes == nil {
		for _, a := range bc.addrs {
			bc.nodes = append(bc.nodes, redis.NewClient(&redis.Options{Addr: a}))
		}
	}
	out := make([]float64, len(bc.addrs))
	for i, c := range bc.nodes {
		s, err := c.Info(ctx, "cpu").Result()
		if err != nil {
			return nil, err
		}
		u, _ := infoField(s, "used_cpu_user")
		sys, _ := infoField(s, "used_cpu_sys")
		out[i] = u + sys
	}
	return out, nil
}

// callsBy returns the calls of each command, summed over the masters.
func (bc *benchCluster) callsBy(ctx context.Context) (map[string]int64, error) {
	out := map[string]int64{}
	for _, a := range bc.addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		s, err := c.Info(ctx, "commandstats").Result()
		c.Close()
		if err != nil {
			return nil, err
		}
		for line := range strings.SplitSeq(s, "\n") {
			if name, rest, ok := strings.Cut(line, ":calls="); ok && strings.HasPrefix(name, "cmdstat_") {
				n, _ := strconv.ParseInt(strings.SplitN(rest, ",", 2)[0], 10, 64)
				out[strings.TrimPrefix(name, "cmdstat_")] += n
			}
		}
	}
	return out, nil
}

func (bc *benchCluster) stop() {
	for _, c := range bc.nodes {
		c.Close()
	}
	for i, c := range bc.cmds {
		terminate(c.Process, bc.done[i], 5*time.Second)
	}
}

// loadAvg is the machine's load average, as uptime prints it.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
