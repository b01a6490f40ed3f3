package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/queue"
)

// APIConfig sizes the api scenario.
type APIConfig struct {
	Duration   time.Duration `flag:"api-duration" default:"10s" usage:"api: each throughput phase's length"`
	Conns      int           `flag:"api-conns" default:"64" usage:"api: HTTP connections (and Go goroutines) for single creates"`
	BatchConns int           `flag:"api-batch-conns" default:"4" usage:"api: concurrent batch creates of 1000"`
	WaitRate   int           `flag:"api-wait-rate" default:"2000" usage:"api: timers due per second in the long-poll phase (one in 20 waited)"`
	WaitEvery  int           `default:"20"`
	Waiters    int           `flag:"api-waiters" default:"10_000" usage:"api: concurrent long polls held open on the API replica"`
	// ConsumeEvents is the fire events one HTTP consumer leases and
	// acknowledges in batches of 100.
	ConsumeEvents int `flag:"api-consume-events" default:"50_000" usage:"api: fire events pull-consumed over HTTP, 100 a lease"`
}

// APIResult is what the api scenario measured. HTTP figures are for one
// API-only timerworker (--claim=false --api-addr) over loopback with
// keep-alive; Go figures are the same work through package queue from this
// process in the same run, so the HTTP layer's share shows.
type APIResult struct {
	Common
	Conns int `json:"conns"`
	// CreatePerS is single creates per second over HTTP; CreateGoPerS the
	// same through queue.Schedule.
	CreatePerS   float64 `json:"create_per_s"`
	CreateGoPerS float64 `json:"create_go_per_s"`
	CreateP50    float64 `json:"create_p50_ms"`
	CreateP99    float64 `json:"create_p99_ms"`
	// APICPUUs is the API replica's CPU per HTTP create; GoCPUUs this
	// process's CPU per queue.Schedule; their difference is what HTTP adds.
	// These and the two below are 0 when no create of their phase finished
	// within Duration (create_per_s or create_go_per_s is then 0 too).
	APICPUUs float64 `json:"api_cpu_us_per_create"`
	GoCPUUs  float64 `json:"go_cpu_us_per_create"`
	// RedisCPUUs is Redis CPU per HTTP create, RedisGoCPUUs per Go create.
	RedisCPUUs   float64 `json:"redis_cpu_us_per_create"`
	RedisGoCPUUs float64 `json:"redis_cpu_us_per_go_create"`

	BatchPerS   float64 `json:"batch_timers_per_s"`
	BatchGoPerS float64 `json:"batch_go_timers_per_s"`

	WaitRate int `json:"wait_rate"`
	Waited   int `json:"waited"`
	// WaitP50 and WaitP99 are from due to the long poll's response.
	WaitP50 float64 `json:"wait_p50_ms"`
	WaitP99 float64 `json:"wait_p99_ms"`
	WaitMax float64 `json:"wait_max_ms"`

	Waiters int `json:"waiters"`
	// WaiterConns is the API replica's Redis connections while Waiters long
	// polls are open (measured first, before other phases grow its pool);
	// WaiterKiB its resident memory added per waiter.
	WaiterConns int     `json:"waiter_redis_conns"`
	WaiterKiB   float64 `json:"waiter_kib"`

	ConsumePerS float64 `json:"consume_events_per_s"`
	Checks
}

// apiClient is the load generator's side of one API replica.
type apiClient struct {
	base string // http://127.0.0.1:port/v1/namespaces/<ns>
	http *http.Client
}

// do sends one request and decodes a 2xx JSON answer into out (if not nil).
func (c *apiClient) do(ctx context.Context, method, path string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("bench: %s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// API runs the HTTP API's scenario: single creates at cfg.Conns
// connections, batch creates, long polls on a steady stream of fires, many
// open long polls, and pull consumption, each beside the Go API's figure
// where there is one. cfg.Workers claim; one more process serves the API.
func (e *Env) API(ctx context.Context, cfg APIConfig) (*APIResult, error) {
	withDefaults(&cfg)
	st, err := e.prepare(ctx, setup{name: "api", startWorkers: true, why: ", to fire the timers it waits on"})
	if err != nil {
		return nil, err
	}
	defer st.close()
	q := st.q
	api, c, err := e.startAPIReplica(ctx, cfg.Waiters+cfg.Conns)
	if err != nil {
		return nil, err
	}
	defer api.stop()

	res := &APIResult{Conns: cfg.Conns, WaitRate: cfg.WaitRate, Waiters: cfg.Waiters}
	w := e.startWindow(ctx)
	run := rand.Uint32()

	// Open waits first, while the replica's connection pool holds only
	// what serving them takes.
	if err := e.apiWaiters(ctx, q, c, api, cfg, run, res); err != nil {
		return nil, err
	}

	gq, closeG, err := e.ownQueue("timerbench-go", cfg.Conns)
	if err != nil {
		return nil, err
	}
	defer closeG()
	// phase runs f, which creates size timers, from g goroutines for
	// cfg.Duration and returns the timers created a second, and the CPU
	// seconds of proc and Redis per call; after a phase failed, none runs.
	var perr error
	phase := func(what string, g, size int, proc func() float64, f func(ctx context.Context, g, i int) error) (perS, procUs, redisUs float64) {
		if perr != nil {
			return 0, 0, 0
		}
		e.logf("api: %s, %d at a time, %s", what, g, cfg.Duration)
		r0, p0 := e.redisCPU(ctx), proc()
		n, err := hammer(ctx, g, cfg.Duration, f)
		perr = err
		return round1(float64(n*size) / cfg.Duration.Seconds()), perOpUs(proc()-p0, n), perOpUs(e.redisCPU(ctx)-r0, n)
	}
	apiCPU := func() float64 { return procCPU(api) }
	var (
		latMu sync.Mutex
		lat   []float64
	)
	res.CreatePerS, res.APICPUUs, res.RedisCPUUs = phase("single creates over HTTP", cfg.Conns, 1, apiCPU, func(ctx context.Context, g, i int) error {
		t := time.Now()
		body := fmt.Appendf(nil, `{"id":"h-%x-%d-%d","in":"1h","payload_text":"0123456789abcdef"}`, run, g, i)
		if err := c.do(ctx, "POST", "/timers", body, nil); err != nil {
			return err
		}
		if i%16 == 0 { // a sample keeps the slice small
			latMu.Lock()
			lat = append(lat, float64(time.Since(t).Microseconds())/1000)
			latMu.Unlock()
		}
		return nil
	})
	slices.Sort(lat)
	res.CreateP50, res.CreateP99 = round3(pct(lat, 0.5)), round3(pct(lat, 0.99))
	res.CreateGoPerS, res.GoCPUUs, res.RedisGoCPUUs = phase("single creates through package queue", cfg.Conns, 1, selfCPU, func(ctx context.Context, g, i int) error {
		_, err := gq.ScheduleIn(ctx, fmt.Sprintf("g-%x-%d-%d", run, g, i), time.Hour, payload16)
		return err
	})
	res.BatchPerS, _, _ = phase("batch creates of 1000 over HTTP", cfg.BatchConns, 1000, apiCPU, func(ctx context.Context, g, i int) error {
		var sb strings.Builder
		sb.WriteString(`{"timers":[`)
		for j := range 1000 {
			if j > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, `{"id":"hb-%x-%d-%d-%d","in":"1h","payload_text":"0123456789abcdef"}`, run, g, i, j)
		}
		sb.WriteString(`]}`)
		return c.do(ctx, "POST", "/timers/batch", []byte(sb.String()), nil)
	})
	res.BatchGoPerS, _, _ = phase("batch creates of 1000 through package queue", cfg.BatchConns, 1000, selfCPU, func(ctx context.Context, g, i int) error {
		ts := make([]queue.NewTimer, 1000)
		for j := range ts {
			ts[j] = queue.NewTimerIn(fmt.Sprintf("gb-%x-%d-%d-%d", run, g, i, j), time.Hour, payload16)
		}
		_, err := gq.ScheduleBatch(ctx, ts)
		return err
	})
	if perr != nil {
		return nil, perr
	}
	if err := e.apiWaits(ctx, q, c, cfg, run, res); err != nil {
		return nil, err
	}
	if err := e.apiConsume(ctx, q, c, cfg, run, res); err != nil {
		return nil, err
	}
	res.Common = w.end(ctx, "api")
	return res, nil
}

// apiWaits schedules cfg.WaitRate timers a second for cfg.Duration, each a
// second ahead, and long-polls one in cfg.WaitEvery over HTTP, timing each
// answer from the timer's due time by the server's clock.
func (e *Env) apiWaits(ctx context.Context, q *queue.Queue, c *apiClient, cfg APIConfig, run uint32, res *APIResult) error {
	e.logf("api: long polls, %d timers/s, one in %d waited, %s", cfg.WaitRate, cfg.WaitEvery, cfg.Duration)
	total := int(float64(cfg.WaitRate) * cfg.Duration.Seconds())
	step := time.Second / time.Duration(cfg.WaitRate)
	t0 := e.serverNow().Add(2 * time.Second).Truncate(time.Millisecond)
	var (
		mu   sync.Mutex
		late []float64
		errs []error
		wg   sync.WaitGroup
	)
	// Each timer is scheduled about a second before it is due.
	err := e.pace(ctx, t0.Add(-time.Second), step, total, 100, 5*time.Millisecond, func(ts []queue.NewTimer, from int) error {
		for j := range ts {
			ts[j] = queue.NewTimer{ID: fmt.Sprintf("w-%x-%d", run, from+j), Due: t0.Add(time.Duration(from+j) * step), Payload: payload16}
		}
		if _, err := q.ScheduleBatch(ctx, ts); err != nil {
			return fmt.Errorf("bench: api waits: %w", err)
		}
		for j, t := range ts {
			if (from+j)%cfg.WaitEvery != 0 {
				continue
			}
			wg.Go(func() {
				var got struct {
					State string `json:"state"`
				}
				err := c.do(ctx, "GET", "/timers/"+t.ID+"/wait?timeout=20s", nil, &got)
				at := e.toServerMs(time.Now())
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					errs = append(errs, err)
				case got.State != "fired":
					errs = append(errs, fmt.Errorf("bench: wait for %s answered state %q", t.ID, got.State))
				default:
					late = append(late, at-float64(t.Due.UnixMilli()))
				}
			})
		}
		return nil
	})
	if err != nil {
		wg.Wait()
		return err
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	slices.Sort(late)
	res.Waited = len(late)
	res.WaitP50, res.WaitP99, res.WaitMax = round3(pct(late, 0.5)), round3(pct(late, 0.99)), round3(pct(late, 1))
	for _, l := range late {
		if l < 0 {
			res.FiredEarly++
		}
	}
	return nil
}

// apiWaiters holds cfg.Waiters long polls open on the API replica and
// reads its Redis connections and resident memory while they wait.
func (e *Env) apiWaiters(ctx context.Context, q *queue.Queue, c *apiClient, api *workerProc, cfg APIConfig, run uint32, res *APIResult) error {
	e.logf("api: %d concurrent long polls", cfg.Waiters)
	ids := make([]string, cfg.Waiters)
	ts := make([]queue.NewTimer, 0, queue.MaxBatch)
	for i := range ids {
		ids[i] = fmt.Sprintf("lw-%x-%d", run, i)
		ts = append(ts, queue.NewTimerIn(ids[i], time.Hour, nil))
		if len(ts) == cap(ts) || i == len(ids)-1 {
			if _, err := q.ScheduleBatch(ctx, ts); err != nil {
				return fmt.Errorf("bench: api waiters: %w", err)
			}
			ts = ts[:0]
		}
	}
	rss0 := procRSSKiB(api)
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var answered atomic.Int64
	var firstErr atomic.Pointer[error]
	// The API caps one client's long polls (api.DefaultMaxHeldPerClient,
	// by remote address), so a thousand come from each loopback address,
	// as from many clients.
	clients := make([]*apiClient, (len(ids)+perClient-1)/perClient)
	for k := range clients {
		clients[k] = c.from(net.IPv4(127, 0, 0, byte(2+k)), perClient)
	}
	defer func() {
		for _, c := range clients {
			c.http.CloseIdleConnections()
		}
	}()
	// A thousand at a time, each thousand open before the next starts, so
	// that the listen backlog never overflows into refused connections.
	var err error
	for i, id := range ids {
		wg.Go(func() {
			err := clients[i/perClient].do(wctx, "GET", "/timers/"+id+"/wait?timeout=25s", nil, nil)
			switch {
			case err == nil:
				answered.Add(1)
			case wctx.Err() == nil:
				firstErr.CompareAndSwap(nil, &err)
			}
		})
		if opened := i + 1; opened%perClient == 0 || opened == len(ids) {
			err = waitUntil(ctx, 20*time.Second, 20*time.Millisecond, func() (bool, error) {
				if err := firstErr.Load(); err != nil {
					return false, fmt.Errorf("a long poll failed: %w", *err)
				}
				return openConns(api) >= opened, nil
			})
			if err != nil {
				break
			}
		}
	}
	time.Sleep(time.Second)
	conns, cerr := redisConns(api, e.url)
	rss1 := procRSSKiB(api)
	cancel()
	wg.Wait()
	if err != nil {
		return fmt.Errorf("bench: api waiters: %d of %d long polls open after 20 s: %w", openConns(api), cfg.Waiters, err)
	}
	if cerr != nil {
		return cerr
	}
	if n := answered.Load(); n > 0 {
		return fmt.Errorf("bench: api waiters: %d long polls on timers due in an hour answered early", n)
	}
	res.WaiterConns = conns
	res.WaiterKiB = round3(float64(rss1-rss0) / float64(cfg.Waiters))
	return nil
}

// apiConsume fires cfg.ConsumeEvents timers at once, then leases and
// acknowledges them over HTTP from one consumer, 100 at a time.
func (e *Env) apiConsume(ctx context.Context, q *queue.Queue, c *apiClient, cfg APIConfig, run uint32, res *APIResult) error {
	e.logf("api: pull-consume %d events, batches of 100", cfg.ConsumeEvents)
	fired0, err := e.rdb.XLen(ctx, q.Keys().Stream(0)).Result()
	if err != nil {
		return fmt.Errorf("bench: api consume: %w", err)
	}
	if _, err := scheduleAll(ctx, q, cfg.ConsumeEvents, 1, func(i int) queue.NewTimer {
		return queue.NewTimerIn(fmt.Sprintf("c-%x-%d", run, i), 0, payload16)
	}); err != nil {
		return err
	}
	err = waitUntil(ctx, time.Minute, 50*time.Millisecond, func() (bool, error) {
		n, err := e.rdb.XLen(ctx, q.Keys().Stream(0)).Result()
		return n-fired0 >= int64(cfg.ConsumeEvents), err
	})
	if err != nil {
		return fmt.Errorf("bench: api consume: waiting for %d fires: %w", cfg.ConsumeEvents, err)
	}
	// The group starts at the stream's start: skip what fired before.
	group := fmt.Sprintf("bench-%x", run)
	total := int(fired0) + cfg.ConsumeEvents
	start := time.Now()
	for got := 0; got < total; {
		var lease struct {
			Deliveries []struct {
				DeliveryID string `json:"delivery_id"`
			} `json:"deliveries"`
		}
		if err := c.do(ctx, "POST", "/groups/"+group+"/lease", []byte(`{"consumer":"c1","count":100}`), &lease); err != nil {
			return err
		}
		if len(lease.Deliveries) == 0 {
			return fmt.Errorf("bench: api consume: lease found nothing after %d of %d events", got, total)
		}
		ack := struct {
			IDs []string `json:"delivery_ids"`
		}{}
		for _, d := range lease.Deliveries {
			ack.IDs = append(ack.IDs, d.DeliveryID)
		}
		body, _ := json.Marshal(ack)
		if err := c.do(ctx, "POST", "/groups/"+group+"/ack", body, nil); err != nil {
			return err
		}
		got += len(lease.Deliveries)
	}
	res.ConsumePerS = round1(float64(total) / time.Since(start).Seconds())
	return nil
}

// perClient is the long polls the waiters phase opens from one address.
const perClient = 1000

// from is a client of the same replica whose connections come from local
// address ip, with a pool of conns.
func (c *apiClient) from(ip net.IP, conns int) *apiClient {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}}
	tr := &http.Transport{DialContext: d.DialContext, MaxIdleConns: conns, MaxIdleConnsPerHost: conns, IdleConnTimeout: time.Minute}
	return &apiClient{base: c.base, http: &http.Client{Transport: tr}}
}

// startAPIReplica starts an API-only timerworker on a free loopback port
// and returns it with a client whose pool holds conns connections.
func (e *Env) startAPIReplica(ctx context.Context, conns int) (*workerProc, *apiClient, error) {
	port, err := freePort()
	if err != nil {
		return nil, nil, fmt.Errorf("bench: the API's port: %w", err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	p, err := e.spawnWorker("--claim=false", "--api-addr", addr)
	if err != nil {
		return nil, nil, err
	}
	tr := &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns, IdleConnTimeout: time.Minute}
	c := &apiClient{base: "http://" + addr + "/v1/namespaces/" + e.cfg.Namespace, http: &http.Client{Transport: tr}}
	err = waitUntil(ctx, 20*time.Second, 20*time.Millisecond, func() (bool, error) {
		if p.exited() {
			return false, fmt.Errorf("bench: the API replica exited at start: %s", p.stderr.String())
		}
		return c.do(ctx, "GET", "", nil, nil) == nil, nil
	})
	if err != nil {
		_ = p.cmd.Process.Kill()
		<-p.done
		return nil, nil, fmt.Errorf("bench: waiting for the API replica on %s: %w", addr, err)
	}
	e.logf("API replica serving on %s", addr)
	return p, c, nil
}

// hammer runs f from g goroutines, each with its own counter i, for d,
// and returns how many calls succeeded; the first error stops it.
func hammer(ctx context.Context, g int, d time.Duration, f func(ctx context.Context, g, i int) error) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var n atomic.Int64
	errs := make([]error, g)
	var wg sync.WaitGroup
	for k := range g {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				if err := f(ctx, k, i); err != nil {
					if ctx.Err() == nil {
						errs[k] = err
						cancel()
					}
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	return int(n.Load()), errors.Join(errs...)
}

// procCPU is a process's user+system CPU seconds from /proc (0 when
// unreadable), at the kernel's tick resolution.
func procCPU(p *workerProc) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses and may hold
	// spaces: state is field 3, utime 14 and stime 15.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ is 100 on Linux
}

// procRSSKiB is a process's resident memory in KiB (0 when unreadable).
func procRSSKiB(p *workerProc) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			return n
		}
	}
	return 0
}

// sockets returns the inodes of a process's open sockets (/proc/PID/fd).
func sockets(p *workerProc) map[string]bool {
	dir := fmt.Sprintf("/proc/%d/fd", p.cmd.Process.Pid)
	ents, _ := os.ReadDir(dir)
	inodes := map[string]bool{}
	for _, ent := range ents {
		if l, err := os.Readlink(dir + "/" + ent.Name()); err == nil {
			if ino, ok := strings.CutPrefix(l, "socket:["); ok {
				inodes[strings.TrimSuffix(ino, "]")] = true
			}
		}
	}
	return inodes
}

// openConns counts a process's open sockets, which for the API replica is
// its HTTP clients plus its few Redis connections.
func openConns(p *workerProc) int { return len(sockets(p)) }

// redisConns counts a process's TCP connections to the Redis server at
// redisURL: its sockets whose entry in /proc/net/tcp has that remote port.
func redisConns(p *workerProc, redisURL string) (int, error) {
	opts, err := redis.ParseURL(redisURL)
	if err != nil {
		return 0, fmt.Errorf("bench: %w", err)
	}
	_, port, err := net.SplitHostPort(opts.Addr)
	if err != nil {
		return 0, fmt.Errorf("bench: %w", err)
	}
	pn, _ := strconv.Atoi(port)
	want, inodes, n := fmt.Sprintf(":%04X", pn), sockets(p), 0
	for _, table := range []string{"tcp", "tcp6"} {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", p.cmd.Process.Pid, table))
		for line := range strings.Lines(string(b)) {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			f := strings.Fields(line)
			if len(f) > 9 && strings.HasSuffix(f[2], want) && f[3] == "01" && inodes[f[9]] {
				n++
			}
		}
	}
	return n, nil
}
