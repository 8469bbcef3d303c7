#!/usr/bin/env bash
# `make test`: installs what is missing, starts a throwaway PostgreSQL, builds every product, and runs the whole
# suite (in-process tests and the built executables driven through stdin/stdout) against that database.
set -euo pipefail
cd "$(dirname "$0")/.."

run_tests() {
    swift build
    FUNCTIONS_BIN_DIR=$(swift build --show-bin-path)
    # Everything the functions and the runner say during the run is kept here for the leak scan at the end.
    LEAK_CAPTURE_DIR=$PWD/.build/leak-capture
    rm -rf "$LEAK_CAPTURE_DIR" && mkdir -p "$LEAK_CAPTURE_DIR"
    export FUNCTIONS_BIN_DIR LEAK_CAPTURE_DIR
    scripts/contract.sh "$FUNCTIONS_BIN_DIR"
    scripts/release-check.sh
    swift test "$@"
    # The app's view of the CaregiverPushClient product: a package outside this one, public API only (whole runs).
    [ "$#" -gt 0 ] || swift test --package-path Tests/ClientConsumer --scratch-path .build/client-consumer
    # Only a whole run (no filter) has captured enough to judge. First the scan must catch a planted token.
    if [ "$#" -eq 0 ]; then
        planted=$(mktemp -d /tmp/caregiver-push-leak-selftest.XXXXXX)
        echo '{"msg":"oops","auth":"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJwbGFudGVkIn0.c2lnbmF0dXJl"}' >"$planted/planted.log"
        if python3 scripts/leak-scan.py "$planted" >/dev/null 2>&1; then
            echo "leak-scan: self-test failed: a planted JWT went unnoticed" >&2
            exit 1
        fi
        rm -rf "$planted"
        python3 scripts/leak-scan.py "$LEAK_CAPTURE_DIR"
    fi
}

if [ "${1:-}" = "--inside" ]; then
    shift
    run_tests "$@"
else
    exec scripts/with-db.sh "${TEST_PG_PORT:-25433}" scripts/test.sh --inside "$@"
fi
