#!/usr/bin/env bash
# `make bench`: release build, a throwaway PostgreSQL, then the benchmarks, which write docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."

configuration=${BENCH_CONFIGURATION:-release}
if [ "${1:-}" = "--inside" ]; then
    swift build -c "$configuration"
    # The floors: pgbench from the PostgreSQL install, and a trivial static C program.
    BENCH_PGBENCH=$(ls -d /usr/lib/postgresql/*/bin/pgbench 2>/dev/null | sort -V | tail -n 1 || true)
    trivial=$(mktemp /tmp/caregiver-push-trivial.XXXXXX)
    if printf 'int main(void) { return 0; }\n' | cc -static -O2 -x c -o "$trivial" - 2>/dev/null; then
        BENCH_TRIVIAL_BINARY=$trivial
    fi
    export BENCH_PGBENCH BENCH_TRIVIAL_BINARY
    "$(swift build -c "$configuration" --show-bin-path)/bench" docs/benchmarks.md
else
    exec scripts/with-db.sh "${BENCH_PG_PORT:-25434}" scripts/bench.sh --inside
fi
