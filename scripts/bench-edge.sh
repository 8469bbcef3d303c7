#!/usr/bin/env bash
# The edge's numbers under abuse, on the debug build (`swift build` first): the runner's RSS under 50 concurrent 1 MiB
# bodies, and the garbage-token throughput of one warm worker with the database connections it holds.
#
#   scripts/bench-edge.sh [PG_PORT]      (default 25443)
#
# Prints one JSON line per measurement; docs/benchmarks.md ("The edge") records them.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/runner-lib.sh

pg_port=${1:-25443}
runner=.build/debug/runner
[ -x "$runner" ] || { echo "bench-edge: build first (swift build)" >&2; exit 1; }

measure() {
    local workdir
    # memory: cold mode, nothing but the runner (the functions never see a refused body).
    workdir=$(mktemp -d /tmp/caregiver-push-bench-edge.XXXXXX)
    SUPABASE_JWT_SECRET=bench-secret-bench-secret-bench-secret \
        start_runner "$workdir" "$runner" --mode cold --no-schedules
    echo -n '{"measurement":"memory",' && scripts/bench-edge.py memory "$runner_pid" "$port" | cut -c2-
    stop_runner
    trap - EXIT

    # tokens: one warm worker per function against a real PostgreSQL; the JWKS URL answers nothing, so an unknown
    # kid could only cost database reads (and a refetch attempt).
    "$runner" migrate >/dev/null
    workdir=$(mktemp -d /tmp/caregiver-push-bench-edge.XXXXXX)
    PUSH_ENVIRONMENT=DEV SUPABASE_JWT_SECRET=bench-secret-bench-secret-bench-secret \
        SUPABASE_JWKS_URL=http://127.0.0.1:9/jwks.json \
        start_runner "$workdir" "$runner" --mode warm --warm-workers 1 --no-schedules
    sleep 2
    for kind in patient jwt; do
        echo -n '{"measurement":"tokens",' && scripts/bench-edge.py tokens "$port" "$DATABASE_URL" 5 "$kind" | cut -c2-
    done
}

if [ -n "${DATABASE_URL:-}" ]; then
    measure
else
    export -f measure start_runner stop_runner
    export runner
    scripts/with-db.sh "$pg_port" bash -c measure
fi
