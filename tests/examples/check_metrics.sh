#!/usr/bin/env bash
# Watching a run (SPEC O4, docs/examples.md "Metrics"): a 4-rank resnet50_dist
# job under `sgrt launch` with --metrics-port and --metrics-file.
#   - its /metrics text passes `promtool check metrics` (Debian's prometheus
#     package) and holds the step histogram, images/s, bytes allreduced,
#     recoveries, ranks by health state and the heartbeat age of each peer;
#   - a real Prometheus server, started here on loopback and scraping before
#     the job starts (a fast machine runs the job in seconds), scrapes it; its
#     query API returns the job's step count (sgrt_steps_total, 1..STEPS);
#   - the metrics file has one JSON line per step, steps 1..STEPS in order,
#     with the loss, images/s, the step split into compute and exposed
#     communication, the health counts and the recoveries.
# Exit 77 (skip) when prometheus or promtool is missing (scripts/install-deps.sh
# installs them).
# usage: check_metrics.sh SGRT RESNET50_DIST
set -euo pipefail
sgrt=$1 bin=$2
py=/usr/bin/python3
command -v prometheus >/dev/null && command -v promtool >/dev/null ||
  { echo "SKIP: prometheus and promtool are not installed (Debian package prometheus)"; exit 77; }
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# GET URL into FILE (or stdout): 0 when it answered 200 (urllib: curl is not a dependency).
get() { "$py" -c 'import sys, urllib.request
b = urllib.request.urlopen(sys.argv[1], timeout=2).read()
(open(sys.argv[2], "wb") if len(sys.argv) > 2 else sys.stdout.buffer).write(b)' "$@" 2>/dev/null; }
free_port() { "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=$(free_port)
prom_port=$(free_port)
steps=60

# A real Prometheus server, started (and scraping) before the job, scrapes it every second from its
# first step on: the job takes a few seconds on a fast machine, less than the server needs to start.
cat >"$work/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: sgrt
    static_configs:
      - targets: ["127.0.0.1:$port"]
EOF
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
  --web.listen-address="127.0.0.1:$prom_port" >"$work/prometheus.log" 2>&1 &
pids+=($!)
for ((i = 0; i < 300; i++)); do
  get "http://127.0.0.1:$prom_port/-/ready" >/dev/null && break
  sleep 0.2
done
get "http://127.0.0.1:$prom_port/-/ready" >/dev/null ||
  { tail -20 "$work/prometheus.log" >&2; fail "Prometheus was not ready within 60 s"; }
# Ready is not scraping yet: Prometheus hands targets to its scrape loops in batches, about 5 s after
# start. Once `up` has a sample (0: the job's port is still closed) a loop scrapes every second.
scraping=
for ((i = 0; i < 300; i++)); do
  scraping=$(get "http://127.0.0.1:$prom_port/api/v1/query?query=up" |
    "$py" -c 'import json, sys; print(len(json.load(sys.stdin)["data"]["result"]))' 2>/dev/null) || scraping=
  [ "${scraping:-0}" -gt 0 ] && break
  sleep 0.2
done
[ "${scraping:-0}" -gt 0 ] || { tail -20 "$work/prometheus.log" >&2; fail "Prometheus did not start scraping within 60 s"; }

"$sgrt" launch -n 4 -- "$bin" --steps $steps --res 32 --width 8 --batch 2 --metrics-port "$port" \
  --metrics-file "$work/steps.jsonl" --json >"$work/job.out" 2>"$work/job.err" &
job=$!
pids+=("$job")
# The first scrape: once the first step is done.
for ((i = 0; i < 600; i++)); do
  get "http://127.0.0.1:$port/metrics" "$work/scrape.txt" && grep -q '^sgrt_steps_total [1-9]' "$work/scrape.txt" && break
  kill -0 "$job" 2>/dev/null || { cat "$work/job.err" >&2; fail "the job ended before its metrics could be read"; }
  sleep 0.1
done
[ -s "$work/scrape.txt" ] || fail "no metrics on port $port within 60 s"
promtool check metrics <"$work/scrape.txt" >"$work/promtool.out" 2>&1 || { cat "$work/promtool.out" >&2; fail "promtool check metrics"; }
[ ! -s "$work/promtool.out" ] || { cat "$work/promtool.out" >&2; fail "promtool has remarks"; }
for name in 'sgrt_step_seconds_bucket{le="+Inf"}' sgrt_step_seconds_count sgrt_images_per_second \
  sgrt_allreduce_bytes_total sgrt_recoveries_total 'sgrt_ranks{state="healthy"}' \
  'sgrt_ranks{state="unreachable"} 0' 'sgrt_heartbeat_age_seconds{rank="1"}' 'sgrt_heartbeat_age_seconds{rank="3"}'; do
  grep -qF "$name" "$work/scrape.txt" || fail "the scrape lacks $name"
done
echo "ok: /metrics passes promtool check metrics ($(grep -c '^sgrt_' "$work/scrape.txt") samples)"

# The query API of the Prometheus server started before the job must return the step count.
got=
for ((i = 0; i < 300; i++)); do
  got=$(get "http://127.0.0.1:$prom_port/api/v1/query?query=sgrt_steps_total" |
    "$py" -c 'import json, sys; r = json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")' 2>/dev/null) || got=
  [ -n "$got" ] && break
  sleep 0.2
done
[ -n "$got" ] || { tail -20 "$work/prometheus.log" >&2; fail "Prometheus returned no sgrt_steps_total within 60 s"; }
"$py" -c "import sys; v = float('$got'); sys.exit(0 if 1 <= v <= $steps else 1)" ||
  fail "Prometheus says sgrt_steps_total is $got, not in 1..$steps"
echo "ok: a Prometheus server scraped the job: sgrt_steps_total = $got"

wait "$job" || { cat "$work/job.err" >&2; fail "the job exited $?"; }
tail -n 1 "$work/job.out" | "$py" -c 'import json, sys; json.loads(sys.stdin.read())' || fail "the job's last line is not JSON"
"$py" - "$work/steps.jsonl" "$steps" <<'EOF' || fail "the metrics file"
import json, math, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
n = int(sys.argv[2])
assert [l["step"] for l in lines] == list(range(1, n + 1)), [l["step"] for l in lines][:5]
for l in lines:
    for k in ("loss", "images_per_s", "step_ms", "compute_ms", "exposed_comm_ms", "allreduce_bytes", "world_size",
              "healthy_ranks", "degraded_ranks", "unreachable_ranks", "recoveries"):
        assert k in l, k
    assert math.isfinite(l["loss"]) and l["images_per_s"] > 0 and l["step_ms"] > 0, l
    assert abs(l["compute_ms"] + l["exposed_comm_ms"] - l["step_ms"]) <= 1e-3 * l["step_ms"] + 1e-3, l
    assert l["world_size"] == 4 and 1 <= l["healthy_ranks"] <= 4 and l["recoveries"] == 0, l
print("ok: the metrics file has %d steps" % len(lines))
EOF
