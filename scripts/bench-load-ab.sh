#!/usr/bin/env bash
# The load section of `make bench` (LoadBenchmark.swift) against a saved build, so that two builds can be measured
# in turn, the same hour, on the same machine (docs/decisions.md#one-call-per-recording did so):
#
#   scripts/bench-load-ab.sh stage DIR          after `BENCH_ONLY=load scripts/bench.sh` (which builds the
#                                               release zips and unpacks them into .build/bench-lambda, the gateway
#                                               and the bench): copies that build's gateway, bench and functions
#                                               into DIR
#   scripts/bench-load-ab.sh run DIR OUTPUT     the load section with DIR's gateway, functions and bench, on a
#                                               durable PostgreSQL of its own (as scripts/bench.sh's prepare_load),
#                                               written to OUTPUT
#
# Stage one commit's build, check out the other, build and stage it, then alternate `run`s of the two. The section's
# own variables apply (BENCH_LOAD_RATES, BENCH_LOAD_SECONDS, BENCH_LOAD_RETRY_AFTER_RATE, BENCH_LOAD_DIRECT_RATES),
# e.g. BENCH_LOAD_RATES=200,300 BENCH_LOAD_SECONDS=20 BENCH_LOAD_RETRY_AFTER_RATE=0 BENCH_LOAD_DIRECT_RATES=0.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
stage)
    dir=${2:?usage: bench-load-ab.sh stage DIR}
    bin=$(swift build -c release --show-bin-path)
    [ -d .build/bench-lambda/bin ] || { echo "bench-load-ab: run BENCH_ONLY=load scripts/bench.sh first" >&2; exit 2; }
    rm -rf "$dir"
    mkdir -p "$dir"
    # The unpacked functions as scripts/bench.sh's unpack_release made them (bin/ links relative to them).
    cp -a .build/bench-lambda "$dir/lambda"
    cp "$bin/gateway" "$bin/bench" "$dir/"
    ;;
run)
    dir=$(cd "${2:?usage: bench-load-ab.sh run DIR OUTPUT}" && pwd)
    output=${3:?usage: bench-load-ab.sh run DIR OUTPUT}
    # The bench's own database (scripts/with-db.sh), then the load section's durable one.
    PG_PRELOAD_LIBRARIES=plpgsql exec scripts/with-db.sh "${BENCH_PG_PORT:-25434}" scripts/bench-load-ab.sh inside "$dir" "$output"
    ;;
inside)
    dir=$2 output=$3
    port=${BENCH_LOAD_PG_PORT:-25435}
    load_pg_dir=$(mktemp -d /tmp/caregiver-push-bench-load-pg.XXXXXX)
    trap 'scripts/pg.sh stop "$load_pg_dir"; rm -rf "$load_pg_dir"' EXIT
    PG_DURABLE=1 PG_PRELOAD_LIBRARIES=pg_stat_statements,plpgsql PG_MAX_CONNECTIONS=300 \
        scripts/pg.sh start "$load_pg_dir" "$port"
    BENCH_LOAD_DATABASE_URL=$(scripts/pg.sh url "$port")
    mkdir -p .build/bench-c
    cc -O2 -Wall -Werror -o .build/bench-c/loadgen Tests/Benchmarks/c/loadgen.c
    cc -O2 -Wall -Werror -static -o .build/bench-c/peak-rss Tests/Benchmarks/c/peak-rss.c
    export BENCH_LOAD_DATABASE_URL BENCH_GATEWAY=$dir/gateway BENCH_LOADGEN=$PWD/.build/bench-c/loadgen
    export BENCH_C_DIRECTORY=$PWD/.build/bench-c BENCH_LAMBDA_DIRECTORY=$dir/lambda BENCH_FUNCTIONS_DIRECTORY=$dir/lambda/bin
    export BENCH_LAMBDA_ZIPS=$PWD/dist/lambda BENCH_ONLY=load BENCH_CONFIGURATION=release
    "$dir/bench" "$output"
    ;;
*)
    sed -n '2,15p' "$0" >&2
    exit 2
    ;;
esac
