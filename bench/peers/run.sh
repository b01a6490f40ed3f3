#!/usr/bin/env bash
# Runs the asynq and BullMQ timer-queue harnesses (see README.md) and appends
# one JSON line per run to an output file. Each run gets a fresh private
# redis-server on a free port, stopped by pid afterwards; the 1-minute load
# average is printed before each run and is in the JSON ("loadavg").
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)

usage() {
	cat <<'EOF'
usage: run.sh [options]
  -p, --peers LIST      comma-separated, from: asynq-default, asynq-100ms,
                        asynq-100ms-tc100ms, bullmq
                        (default asynq-default,asynq-100ms,bullmq)
  -s, --scenarios LIST  comma-separated, from: steady, burst, idle (default steady,burst)
  -n, --runs N          rounds; each round runs every scenario of every peer once (default 3)
  -o, --out FILE        append the JSON lines here (default peers.jsonl)
      --tasks N         burst: tasks due at the one instant (default 100000)
      --rate N          steady: tasks due per second (default 2000)
      --duration S      steady: seconds during which tasks come due (default 10)
      --lock FILE       hold flock(1) on FILE during each run, to take turns
                        with other benchmarks on a shared machine
Peers: asynq-default = asynq's defaults (DelayedTaskCheckInterval 5s);
asynq-100ms = DelayedTaskCheckInterval 100ms; asynq-100ms-tc100ms = that and
TaskCheckInterval 100ms; bullmq = BullMQ Worker defaults.
EOF
}

peers=asynq-default,asynq-100ms,bullmq
scenarios=steady,burst
runs=3
out=peers.jsonl
tasks=100000
rate=2000
duration=10
lock=
while [ $# -gt 0 ]; do
	case $1 in
	-p | --peers) peers=$2 ;;
	-s | --scenarios) scenarios=$2 ;;
	-n | --runs) runs=$2 ;;
	-o | --out) out=$2 ;;
	--tasks) tasks=$2 ;;
	--rate) rate=$2 ;;
	--duration) duration=$2 ;;
	--lock) lock=$2 ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
	shift 2
done

for peer in ${peers//,/ }; do
	case $peer in asynq-default | asynq-100ms | asynq-100ms-tc100ms | bullmq) ;; *) echo "run.sh: unknown peer $peer" >&2; exit 2 ;; esac
done
for scenario in ${scenarios//,/ }; do
	case $scenario in steady | burst | idle) ;; *) echo "run.sh: unknown scenario $scenario" >&2; exit 2 ;; esac
done
for tool in redis-server redis-cli python3; do
	command -v "$tool" >/dev/null || { echo "run.sh: $tool not on PATH" >&2; exit 1; }
done
case ,$peers, in *,asynq*)
	[ -x "$here/asynq/asynqbench" ] || { echo "run.sh: build it first: (cd $here/asynq && go build -o asynqbench .)" >&2; exit 1; } ;;
esac
case ,$peers, in *,bullmq,*)
	[ -d "$here/bullmq/node_modules" ] || { echo "run.sh: install it first: (cd $here/bullmq && npm ci)" >&2; exit 1; } ;;
esac

# asynq_flags PEER: the asynq Config settings that make up the peer.
asynq_flags() {
	case $1 in
	asynq-default) ;;
	asynq-100ms) echo -delayed-interval 100ms ;;
	asynq-100ms-tc100ms) echo -delayed-interval 100ms -task-check-interval 100ms ;;
	esac
}

redis_pid=
redis_dir=
port=
idle_pids=()

start_redis() {
	# A free port from the kernel; 6379 is refused so a default Redis is never touched.
	port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	[ "$port" != 6379 ] || { echo "run.sh: got port 6379, refusing" >&2; exit 1; }
	redis_dir=$(mktemp -d)
	# No persistence, so no disk work in the measurement; the default hz 10 is kept.
	redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$redis_dir" \
		--daemonize yes --pidfile "$redis_dir/redis.pid" >/dev/null
	for _ in $(seq 50); do
		redis-cli -p "$port" ping >/dev/null 2>&1 && [ -s "$redis_dir/redis.pid" ] && break
		sleep 0.1
	done
	redis_pid=$(cat "$redis_dir/redis.pid")
}

stop_redis() {
	if [ -n "$redis_pid" ]; then
		kill "$redis_pid" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$redis_pid" 2>/dev/null || break; sleep 0.1; done
		redis_pid=
	fi
	[ -z "$redis_dir" ] || rm -rf "$redis_dir"
	redis_dir=
}

cleanup() {
	[ ${#idle_pids[@]} -eq 0 ] || kill "${idle_pids[@]}" 2>/dev/null || true
	stop_redis
}
trap cleanup EXIT
trap 'exit 130' INT TERM

redis_cpu_seconds() {
	redis-cli -p "$port" info cpu | awk -F: '/^used_cpu_(user|sys):/ { s += $2 } END { printf "%.6f", s }'
}

# measure_idle PEER: Redis CPU of 4 consumers with nothing queued, over 10 s
# after 3 s to settle, i.e. the polling cost included in every per-task figure.
# Sets json rather than printing it: in a $(...) subshell, the EXIT trap could
# not stop the workers if the script is interrupted.
measure_idle() {
	local w c0 c1
	for w in 1 2 3 4; do
		if [ "$1" = bullmq ]; then
			node "$here/bullmq/worker.js" --port="$port" >/dev/null &
		else
			# shellcheck disable=SC2046 # the flags are meant to split
			"$here/asynq/asynqbench" worker -redis "127.0.0.1:$port" $(asynq_flags "$1") >/dev/null &
		fi
		idle_pids+=($!)
	done
	sleep 3
	c0=$(redis_cpu_seconds)
	sleep 10
	c1=$(redis_cpu_seconds)
	kill "${idle_pids[@]}"
	wait "${idle_pids[@]}" || true
	idle_pids=()
	json=$(python3 -c 'import json, sys; print(json.dumps({"scenario": "idle", "config": sys.argv[1], "workers": 4, "idle_window_s": 10,
		"idle_redis_cpu_s_per_s": (float(sys.argv[3]) - float(sys.argv[2])) / 10, "loadavg": open("/proc/loadavg").read().strip()}))' "$1" "$c0" "$c1")
}

# run_harness PEER SCENARIO: one steady or burst run; prints its JSON line.
run_harness() {
	if [ "$1" = bullmq ]; then
		node "$here/bullmq/bench.js" --port="$port" --scenario="$2" --tasks="$tasks" --rate="$rate" --duration="$duration"
	else
		# shellcheck disable=SC2046
		"$here/asynq/asynqbench" -redis "127.0.0.1:$port" -scenario "$2" -tasks "$tasks" -rate "$rate" \
			-duration "${duration}s" $(asynq_flags "$1")
	fi
}

if [ -n "$lock" ]; then exec {lock_fd}>>"$lock"; fi
for round in $(seq "$runs"); do
	for scenario in ${scenarios//,/ }; do
		for peer in ${peers//,/ }; do
			label=$peer-$scenario
			[ "$scenario" != idle ] || label=idle-$peer
			[ -z "$lock" ] || flock "$lock_fd"
			start_redis
			echo "$(date -u +%FT%TZ) $label round $round/$runs, redis port $port, loadavg $(cat /proc/loadavg)" >&2
			if [ "$scenario" = idle ]; then
				measure_idle "$peer"
			else
				json=$(run_harness "$peer" "$scenario" | tail -n 1)
			fi
			stop_redis
			[ -z "$lock" ] || flock -u "$lock_fd"
			python3 -c 'import json, sys; d = json.loads(sys.argv[1]); d["label"] = sys.argv[2]; print(json.dumps(d))' \
				"$json" "$label" | tee -a "$out"
		done
	done
done
