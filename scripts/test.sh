#!/usr/bin/env bash
# `make test`: installs what is missing, starts a throwaway PostgreSQL, builds every product, and runs the whole
# suite (in-process tests and the built executables driven through stdin/stdout) against that database.
set -euo pipefail
cd "$(dirname "$0")/.."

run_tests() {
    swift build
    FUNCTIONS_BIN_DIR=$(swift build --show-bin-path)
    export FUNCTIONS_BIN_DIR
    swift test "$@"
}

if [ "${1:-}" = "--inside" ]; then
    shift
    run_tests "$@"
else
    exec scripts/with-db.sh "${TEST_PG_PORT:-25433}" scripts/test.sh --inside "$@"
fi
