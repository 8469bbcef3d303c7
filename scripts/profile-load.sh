#!/usr/bin/env bash
# Where a recording's CPU goes under load: runs the load section (scripts/bench.sh, BENCH_ONLY=load) at one rate
# with `perf record -a -g` sampling every core for most of that rate's run, then summarises the samples by process,
# by library and by layer (scripts/profile-summary.py) into a markdown file. A diagnosis, not a benchmark: sampling
# every core costs CPU of its own, so its load figures are not the bench's.
#
#   scripts/profile-load.sh [RATE] [SECONDS]     RATE recordings/s (200) for SECONDS (40)
#
# Writes bench-out/profile-load.md (the load section's own report of the run) and bench-out/profile.md (the
# summary); the samples stay in bench-out/profile.perf.data. Reuses dist/lambda's zips when they are there
# (scripts/release.sh makes them); their symbols come from dist/lambda-debug.
# Installs perf (Debian's linux-perf) when missing and run as root; sampling every core needs root or
# kernel.perf_event_paranoid <= -1.
set -euo pipefail
cd "$(dirname "$0")/.."

rate=${1:-200}
seconds=${2:-40}
out=bench-out
data=$out/profile.perf.data
if ! command -v perf >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get install -y -qq -o DPkg::Lock::Timeout=300 linux-perf >/dev/null
    else
        echo "profile-load: perf is not installed; run: sudo apt-get install -y linux-perf" >&2
        exit 1
    fi
fi
mkdir -p "$out"
rm -f "$data" "$out/profile-processes.txt"

# The sampler waits for the load generator, lets the rate settle for 8 s, then samples for all but the run's last
# few seconds, and notes every process's command line (the FCM stand-in is the bench executable started again).
sample_seconds=$((seconds > 20 ? seconds - 12 : seconds / 2))
(
    for _ in $(seq 900); do
        pgrep -x loadgen >/dev/null && break
        sleep 1
    done
    sleep 8
    ps -eo pid=,args= >"$out/profile-processes.txt"
    perf record -F 499 -a -g -o "$data" -- sleep "$sample_seconds" >/dev/null 2>"$out/profile-record.log"
) &
sampler=$!
# A load section that fails before its load generator starts must not leave the sampler waiting for it.
trap 'kill "$sampler" 2>/dev/null || true' EXIT

BENCH_ONLY=load BENCH_OUTPUT=$out/profile-load.md BENCH_REUSE_ZIPS=1 BENCH_LOAD_RATES=$rate \
    BENCH_LOAD_SECONDS=$seconds BENCH_LOAD_RETRY_AFTER_RATE=0 scripts/bench.sh
wait "$sampler"

# The shipped executables are stripped, each naming its symbols' file by .gnu_debuglink: perf looks for that name
# beside the executable it ran.
for debug in dist/lambda-debug/*.debug; do
    function=$(basename "$debug" .debug)
    [ -d ".build/bench-lambda/$function" ] && ln -sf "$PWD/$debug" ".build/bench-lambda/$function/$function.debug"
done
perf script -i "$data" -F pid,tid,comm,ip,sym,dso 2>/dev/null |
    python3 scripts/profile-summary.py --processes "$out/profile-processes.txt" \
        --title "Where a recording's CPU goes at $rate recordings/s" \
        --command "scripts/profile-load.sh $rate $seconds" >"$out/profile.md"
echo "profile-load: $out/profile.md"
