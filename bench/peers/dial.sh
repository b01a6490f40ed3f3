#!/usr/bin/env bash
# Measures timerq's latency/cost dial (--min-claim-interval) beside the peers
# in one sitting: `timerbench steady` at each claim interval and run.sh's
# steady runs of the peers, alternated within each round, each run on its own
# fresh private redis-server. Appends one JSON line per run to the output
# file; dial.py turns it into the table and the plot (see README.md,
# "The latency/cost dial").
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)

usage() {
	cat <<'EOF'
usage: dial.sh [options]
  -i, --intervals LIST  timerq --min-claim-interval values, comma-separated
                        (default 1us,1ms,5ms,20ms,50ms,100ms,250ms,500ms,1s)
  -p, --peers LIST      run.sh peer settings, comma-separated
                        (default asynq-default,asynq-100ms,asynq-100ms-tc100ms,bullmq)
  -n, --runs N          rounds (default 3); round 2, 4, ... run in reverse order
  -r, --round K         run only round K of N (to give each round its own
                        quiet window); default: all rounds
  -o, --out FILE        append the JSON lines here (default dial.jsonl)
      --rate N          timers due per second (default 2000)
      --duration S      seconds during which timers come due (default 10)
Needs TIMERBENCH and TIMERWORKER (paths of built binaries, e.g.
go build -o "$T/timerbench" ./cmd/timerbench), and what run.sh needs.
EOF
}

intervals=1us,1ms,5ms,20ms,50ms,100ms,250ms,500ms,1s
peers=asynq-default,asynq-100ms,asynq-100ms-tc100ms,bullmq
runs=3
only=
out=dial.jsonl
rate=2000
duration=10
while [ $# -gt 0 ]; do
	case $1 in
	-i | --intervals) intervals=$2 ;;
	-p | --peers) peers=$2 ;;
	-n | --runs) runs=$2 ;;
	-r | --round) only=$2 ;;
	-o | --out) out=$2 ;;
	--rate) rate=$2 ;;
	--duration) duration=$2 ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
	shift 2
done
: "${TIMERBENCH:?set TIMERBENCH to a built timerbench}" "${TIMERWORKER:?set TIMERWORKER to a built timerworker}"

# The order of one round: the timerq points in rising order, a peer after
# every two or three of them, so that a drift of the machine over the round
# touches both.
read -ra tq <<<"${intervals//,/ }"
read -ra pe <<<"${peers//,/ }"
order=()
per=$(((${#tq[@]} + ${#pe[@]} - 1) / ${#pe[@]}))
k=0
for i in "${!tq[@]}"; do
	order+=("timerq:${tq[$i]}")
	if [ $(((i + 1) % per)) -eq 0 ] && [ $k -lt ${#pe[@]} ]; then
		order+=("peer:${pe[$k]}")
		k=$((k + 1))
	fi
done
for ((; k < ${#pe[@]}; k++)); do order+=("peer:${pe[$k]}"); done

# timerq_run INTERVAL: one timerbench steady run (its own redis-server on a
# free port) with the workers' claim interval set; prints the JSON line.
timerq_run() {
	local load json
	load=$(cat /proc/loadavg)
	echo "$(date -u +%FT%TZ) timerq-$1, loadavg $load" >&2
	json=$(TIMERQ_MIN_CLAIM_INTERVAL=$1 "$TIMERBENCH" steady --json --quiet --worker-bin "$TIMERWORKER" \
		--rate "$rate" --duration "${duration}s" --workers 4)
	python3 -c 'import json, sys
d = json.loads(sys.argv[1])
d.update(label="timerq-" + sys.argv[2], peer="timerq", min_claim_interval=sys.argv[2], loadavg=sys.argv[3],
         loadavg_after=open("/proc/loadavg").read().strip(),
         redis_cpu_us_per_task=d["redis_cpu_s"] * 1e6 / d["timers"])
print(json.dumps(d))' "$json" "$1" "$load" | tee -a "$out"
}

for round in $(seq "$runs"); do
	[ -z "$only" ] || [ "$only" = "$round" ] || continue
	seq_=("${order[@]}")
	if [ $((round % 2)) -eq 0 ]; then
		seq_=()
		for ((j = ${#order[@]} - 1; j >= 0; j--)); do seq_+=("${order[$j]}"); done
	fi
	echo "round $round/$runs: ${seq_[*]}" >&2
	for item in "${seq_[@]}"; do
		case $item in
		timerq:*) timerq_run "${item#timerq:}" ;;
		peer:*) "$here/run.sh" -p "${item#peer:}" -s steady -n 1 --rate "$rate" --duration "$duration" -o "$out" ;;
		esac
	done
done
