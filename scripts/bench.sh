#!/usr/bin/env bash
# `make bench`: release build, a throwaway PostgreSQL, then the benchmarks, which write docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."

configuration=${BENCH_CONFIGURATION:-release}
if [ "${1:-}" = "--inside" ]; then
    swift build -c "$configuration"
    "$(swift build -c "$configuration" --show-bin-path)/bench" docs/benchmarks.md
else
    exec scripts/with-db.sh "${BENCH_PG_PORT:-25434}" scripts/bench.sh --inside
fi
