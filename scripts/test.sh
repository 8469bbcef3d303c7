#!/usr/bin/env bash
# `make test`: installs what is missing, starts a throwaway PostgreSQL, builds every product, and runs the whole
# suite (in-process tests and the built executables driven through stdin/stdout) against that database.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh

port=${TEST_PG_PORT:-25433}
datadir=$(mktemp -d /tmp/caregiver-push-test-pg.XXXXXX)
cleanup() {
    scripts/pg.sh stop "$datadir"
    rm -rf "$datadir"
}
trap cleanup EXIT
scripts/pg.sh start "$datadir" "$port"
export DATABASE_URL
DATABASE_URL=$(scripts/pg.sh url "$port")

swift build
FUNCTIONS_BIN_DIR=$(swift build --show-bin-path)
export FUNCTIONS_BIN_DIR
swift test "$@"
