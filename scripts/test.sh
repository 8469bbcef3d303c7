#!/usr/bin/env bash
# `make test`: installs what is missing, starts a throwaway PostgreSQL, builds every product, and runs the whole
# suite (in-process tests and the built executables driven through stdin/stdout) against that database.
set -euo pipefail
cd "$(dirname "$0")/.."

run_tests() {
    swift build
    FUNCTIONS_BIN_DIR=$(swift build --show-bin-path)
    export FUNCTIONS_BIN_DIR
    # The contract checks first, so that the Swift suite's summary is the run's last line.
    scripts/contract.sh "$FUNCTIONS_BIN_DIR"
    scripts/release-check.sh
    swift test "$@"
}

if [ "${1:-}" = "--inside" ]; then
    shift
    run_tests "$@"
else
    exec scripts/with-db.sh "${TEST_PG_PORT:-25433}" scripts/test.sh --inside "$@"
fi
