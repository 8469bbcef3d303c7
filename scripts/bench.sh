#!/usr/bin/env bash
# `make bench`: release build, a throwaway PostgreSQL, then the benchmarks, which write docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh

port=${BENCH_PG_PORT:-25434}
datadir=$(mktemp -d /tmp/caregiver-push-bench-pg.XXXXXX)
cleanup() {
    scripts/pg.sh stop "$datadir"
    rm -rf "$datadir"
}
trap cleanup EXIT
scripts/pg.sh start "$datadir" "$port"
export DATABASE_URL
DATABASE_URL=$(scripts/pg.sh url "$port")

configuration=${BENCH_CONFIGURATION:-release}
swift build -c "$configuration"
"$(swift build -c "$configuration" --show-bin-path)/bench" docs/benchmarks.md
