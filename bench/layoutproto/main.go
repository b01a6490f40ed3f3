// Command layoutproto counts the instructions Redis runs per claim and
// schedule call, and the bytes a pending timer takes, for six record
// layouts (scripts.go), against a redis-server run under callgrind, or with
// -mem a plain one it may wipe. README.md says how to run it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

type variant struct {
	name        string
	claim       string
	sched       string
	claimKeys   func(p string) []string
	claimArgs   func(p string) []any
	schedKeys   func(p string) []string
	schedPrefix func(p string) []any // ARGV before the triples
	rec         func(now int64, payload string) string
	// place writes a pending timer (setup, not measured).
	place func(pipe redis.Pipeliner, p, id string, due float64, rec string)
	// settle writes a settled (fired) timer, so that the settled
	// structures are as large as a running namespace's.
	settle func(pipe redis.Pipeliner, p, id string, at int64, rec string)
}

func zadd(pipe redis.Pipeliner, key string, score float64, id string) {
	pipe.ZAdd(context.Background(), key, redis.Z{Score: score, Member: id})
}

func hset(pipe redis.Pipeliner, key, id, rec string) {
	pipe.HSet(context.Background(), key, id, rec)
}

const B = 312 // 10,000 pending and 10,000 settled timers / 64 a bucket

func bucketCheap(id string, b int) int {
	return (int(id[len(id)-2])*256 + int(id[len(id)-1])) % b
}

func bucket(id string, b int) int {
	h := 0
	for i := 0; i < len(id); i++ {
		h = (h*31 + int(id[i])) % b
	}
	return h
}

func b36(n int64) string { return strconv.FormatInt(n, 36) }

func variants(nb int) []variant {
	return []variant{
		{
			name: "floor", claim: claimFloor, sched: schedFloor,
			claimKeys: func(p string) []string { return []string{p + "z", p + "h", p + "fires"} },
			claimArgs: func(p string) []any { return nil },
			schedKeys: func(p string) []string { return []string{p + "z", p + "h"} },
			rec:       func(now int64, payload string) string { return payload },
			place: func(pipe redis.Pipeliner, p, id string, due float64, rec string) {
				pipe.ZAdd(context.Background(), p+"z", redis.Z{Score: due, Member: id})
				pipe.HSet(context.Background(), p+"h", id, rec)
			},
			settle: func(pipe redis.Pipeliner, p, id string, at int64, rec string) {},
		},
		{
			name: "v1", claim: claimV1, sched: schedV1,
			claimKeys: func(p string) []string {
				return []string{p + "due", p + "timers", p + "fired", p + "expire", p + "fires", p + "counters", p + "traces", p + "deliver"}
			},
			claimArgs: func(p string) []any { return []any{"1000", p + "t:"} },
			schedKeys: func(p string) []string {
				return []string{p + "due", p + "timers", p + "fired", p + "cancelled", p + "expire", p + "fires", p + "meta"}
			},
			rec: func(now int64, payload string) string { return "s::" + strconv.FormatInt(now, 10) + "::" + payload },
			place: func(pipe redis.Pipeliner, p, id string, due float64, rec string) {
				pipe.ZAdd(context.Background(), p+"due", redis.Z{Score: due, Member: id})
				pipe.HSet(context.Background(), p+"timers", id, rec)
			},
			settle: func(pipe redis.Pipeliner, p, id string, at int64, rec string) {
				zadd(pipe, p+"fired", float64(at), id)
				zadd(pipe, p+"expire", float64(at+604800000), id)
				hset(pipe, p+"timers", id, rec)
			},
		},
		{
			name: "doc", claim: claimDoc, sched: schedDoc,
			claimKeys:   func(p string) []string { return []string{p + "pending", p + "settled", p + "fires", p + "counters"} },
			claimArgs:   func(p string) []any { return []any{"1000", p + "t:", strconv.Itoa(nb), p + "rec:"} },
			schedKeys:   func(p string) []string { return []string{p + "pending"} },
			schedPrefix: func(p string) []any { return []any{strconv.Itoa(nb), p + "rec:"} },
			rec:         func(now int64, payload string) string { return "s" + b36(now) + ":" + payload },
			place: func(pipe redis.Pipeliner, p, id string, due float64, rec string) {
				pipe.ZAdd(context.Background(), p+"pending", redis.Z{Score: due, Member: id})
				pipe.HSet(context.Background(), p+"rec:"+strconv.Itoa(bucket(id, nb)), id, rec)
			},
			settle: func(pipe redis.Pipeliner, p, id string, at int64, rec string) {
				zadd(pipe, p+"settled", float64(at+604800000), id)
				hset(pipe, p+"rec:"+strconv.Itoa(bucket(id, nb)), id, rec)
			},
		},
		{
			name: "bands", claim: claimBands, sched: schedBands,
			claimKeys: func(p string) []string { return []string{p + "z", p + "recs", p + "fires"} },
			claimArgs: func(p string) []any { return []any{"1000", p + "t:"} },
			schedKeys: func(p string) []string { return []string{p + "z", p + "recs"} },
			rec:       func(now int64, payload string) string { return "s" + b36(now) + ":" + payload },
			place: func(pipe redis.Pipeliner, p, id string, due float64, rec string) {
				pipe.ZAdd(context.Background(), p+"z", redis.Z{Score: due, Member: id})
				pipe.HSet(context.Background(), p+"recs", id, rec)
			},
			settle: func(pipe redis.Pipeliner, p, id string, at int64, rec string) {
				zadd(pipe, p+"z", 1e15+float64(at), id)
				hset(pipe, p+"recs", id, rec)
			},
		},
		{
			name: "bandsb", claim: claimBandsB, sched: schedBandsB,
			claimKeys:   func(p string) []string { return []string{p + "z", p + "z", p + "fires", p + "counters"} },
			claimArgs:   func(p string) []any { return []any{"1000", p + "t:", strconv.Itoa(nb), p + "rec:"} },
			schedKeys:   func(p string) []string { return []string{p + "z"} },
			schedPrefix: func(p string) []any { return []any{strconv.Itoa(nb), p + "rec:"} },
			rec:         func(now int64, payload string) string { return "s" + b36(now) + ":" + payload },
			place: func(pipe redis.Pipeliner, p, id string, due float64, rec string) {
				pipe.ZAdd(context.Background(), p+"z", redis.Z{Score: due, Member: id})
				pipe.HSet(context.Background(), p+"rec:"+strconv.Itoa(bucket(id, nb)), id, rec)
			},
			settle: func(pipe redis.Pipeliner, p, id string, at int64, rec string) {
				zadd(pipe, p+"z", 1e15+float64(at), id)
				hset(pipe, p+"rec:"+strconv.Itoa(bucket(id, nb)), id, rec)
			},
		},
		{
			name: "bandsc", claim: claimBandsC, sched: schedBandsC,
			claimKeys:   func(p string) []string { return []string{p + "z", p + "z", p + "fires", p + "counters"} },
			claimArgs:   func(p string) []any { return []any{"1000", p + "t:", strconv.Itoa(nb), p + "rec:"} },
			schedKeys:   func(p string) []string { return []string{p + "z"} },
			schedPrefix: func(p string) []any { return []any{strconv.Itoa(nb), p + "rec:"} },
			rec:         func(now int64, payload string) string { return "s" + b36(now) + ":" + payload },
			place: func(pipe redis.Pipeliner, p, id string, due float64, rec string) {
				pipe.ZAdd(context.Background(), p+"z", redis.Z{Score: due, Member: id})
				pipe.HSet(context.Background(), p+"rec:"+strconv.Itoa(bucketCheap(id, nb)), id, rec)
			},
			settle: func(pipe redis.Pipeliner, p, id string, at int64, rec string) {
				zadd(pipe, p+"z", 1e15+float64(at), id)
				hset(pipe, p+"rec:"+strconv.Itoa(bucketCheap(id, nb)), id, rec)
			},
		},
	}
}

var seq int

func newID() string {
	seq++
	return fmt.Sprintf("9a3963c1-0000-4000-8000-%012x", seq)
}

const payload = "0123456789abcdef"

func fill(ctx context.Context, rdb *redis.Client, v variant, p string, n int, dueAt float64) {
	now := time.Now().UnixMilli()
	for i := 0; i < n; i += 1000 {
		pipe := rdb.Pipeline()
		for j := i; j < i+1000 && j < n; j++ {
			v.place(pipe, p, newID(), dueAt+float64(j)/10, v.rec(now, payload))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			panic(err)
		}
	}
}

func fillSettled(ctx context.Context, rdb *redis.Client, v variant, p string, n int) {
	now := time.Now().UnixMilli()
	for i := 0; i < n; i += 1000 {
		pipe := rdb.Pipeline()
		for j := i; j < i+1000 && j < n; j++ {
			at := now - int64(n-j)
			v.settle(pipe, p, newID(), at, "f"+b36(at-5)+":"+b36(at-3000)+":"+b36(at)+":"+payload)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			panic(err)
		}
	}
}

type meter struct {
	pid int
	dir string
}

func (m meter) zero() {
	if err := exec.Command("callgrind_control", "-z", strconv.Itoa(m.pid)).Run(); err != nil {
		panic(err)
	}
}

// dump returns the instructions since zero.
func (m meter) dump() int64 {
	before, _ := filepath.Glob(filepath.Join(m.dir, "callgrind.out.*"))
	if err := exec.Command("callgrind_control", "-d", strconv.Itoa(m.pid)).Run(); err != nil {
		panic(err)
	}
	after, _ := filepath.Glob(filepath.Join(m.dir, "callgrind.out.*"))
	seen := map[string]bool{}
	for _, f := range before {
		seen[f] = true
	}
	for _, f := range after {
		if seen[f] {
			continue
		}
		b, _ := os.ReadFile(f)
		if os.Getenv("KEEP") == "" {
			os.Remove(f)
		} else {
			fmt.Fprintln(os.Stderr, "kept", f)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "summary: "); ok {
				n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
				return n
			}
			if v, ok := strings.CutPrefix(l, "totals: "); ok {
				n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
				return n
			}
		}
	}
	panic("no dump")
}

// firedOf reads how many timers a claim fired from its reply: the
// floor's first element, the others' third (absent when none fired).
func firedOf(name string, res any) int64 {
	r := res.([]any)
	if name == "floor" {
		return r[0].(int64)
	}
	if len(r) < 3 {
		return 0
	}
	return r[2].(int64)
}

// cell is a median with its range, in thousands of instructions.
func cell(xs []int64) string {
	lo, hi := xs[0], xs[0]
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	return fmt.Sprintf("%d [%d-%d]", median(xs)/1000, lo/1000, hi/1000)
}

func median(xs []int64) int64 {
	s := append([]int64(nil), xs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func main() {
	addr := flag.String("addr", "127.0.0.1:6393", "redis")
	dir := flag.String("dir", "/tmp/cg", "the directory callgrind writes its dumps in (valgrind's working directory)")
	mem := flag.Bool("mem", false, "measure memory per pending timer instead")
	reps := flag.Int("reps", 5, "repeats")
	flag.Parse()
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: *addr, Protocol: 2})
	if *mem {
		if n, err := rdb.DBSize(ctx).Result(); err != nil || n > 0 {
			fmt.Fprintf(os.Stderr, "layoutproto: -mem wipes its server (FLUSHALL); %s holds %d keys (%v): use a private one\n", *addr, n, err)
			os.Exit(2)
		}
		memory(ctx, rdb)
		return
	}
	info, _ := rdb.Info(ctx, "server").Result()
	var pid int
	for _, l := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(l, "process_id:"); ok {
			pid, _ = strconv.Atoi(v)
		}
	}
	m := meter{pid: pid, dir: *dir}
	far := float64(time.Now().Add(time.Hour).UnixMilli())
	fmt.Printf("%-7s %16s %16s %16s %16s %18s %16s\n", "layout", "claim0", "claim1", "claim2", "claim4", "claim16", "schedule4")
	for _, v := range variants(B) {
		if only := os.Getenv("ONLY"); only != "" && !strings.Contains(","+only+",", ","+v.name+",") {
			continue
		}
		p := os.Getenv("PFX") + v.name + ":"
		fill(ctx, rdb, v, p, 10000, far)
		fillSettled(ctx, rdb, v, p, 10000)
		// Let active rehashing finish growing the new keys' tables, so
		// that no measured call pays for it.
		time.Sleep(5 * time.Second)
		claim := redis.NewScript(v.claim)
		sched := redis.NewScript(v.sched)
		_ = claim.Load(ctx, rdb).Err()
		_ = sched.Load(ctx, rdb).Err()
		row := []string{}
		for _, k := range []int{0, 1, 2, 4, 16} {
			var xs []int64
			for r := 0; r < *reps; r++ {
				fill(ctx, rdb, v, p, k, float64(time.Now().Add(-10*time.Millisecond).UnixMilli()))
				m.zero()
				res, err := claim.EvalSha(ctx, rdb, v.claimKeys(p), v.claimArgs(p)...).Result()
				n := m.dump()
				if err != nil {
					panic(fmt.Sprint(v.name, " claim: ", err))
				}
				if fired := firedOf(v.name, res); fired != int64(k) {
					panic(fmt.Sprintf("%s: a claim of %d due timers fired %d", v.name, k, fired))
				}
				xs = append(xs, n)
			}
			row = append(row, cell(xs))
		}
		var xs []int64
		for r := 0; r < *reps; r++ {
			args := []any{}
			if v.schedPrefix != nil {
				args = append(args, v.schedPrefix(p)...)
			}
			for i := 0; i < 4; i++ {
				args = append(args, newID(), strconv.FormatFloat(far+float64(r*4+i), 'f', 3, 64), payload)
			}
			m.zero()
			_, err := sched.EvalSha(ctx, rdb, v.schedKeys(p), args...).Result()
			n := m.dump()
			if err != nil {
				panic(fmt.Sprint(v.name, " schedule: ", err))
			}
			xs = append(xs, n)
		}
		row = append(row, cell(xs))
		fmt.Printf("%-7s %16s %16s %16s %16s %18s %16s\n", v.name, row[0], row[1], row[2], row[3], row[4], row[5])
	}
}

func memory(ctx context.Context, rdb *redis.Client) {
	const n = 100000
	for _, v := range variants(n / 64) {
		if err := rdb.FlushAll(ctx).Err(); err != nil {
			panic(err)
		}
		before := usedMemory(ctx, rdb)
		fill(ctx, rdb, v, "p:"+v.name+":", n, float64(time.Now().Add(time.Hour).UnixMilli())+0.123)
		after := usedMemory(ctx, rdb)
		fmt.Printf("%-7s %.1f B per pending timer\n", v.name, float64(after-before)/n)
	}
}

func usedMemory(ctx context.Context, rdb *redis.Client) int64 {
	info, _ := rdb.Info(ctx, "memory").Result()
	for _, l := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(l, "used_memory:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}
