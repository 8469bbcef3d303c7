#!/usr/bin/env bash
# Runs a command against a throwaway PostgreSQL: installs what is missing, starts a cluster in a temporary
# directory on 127.0.0.1:PORT, exports DATABASE_URL, runs the command, and removes the cluster whatever happens.
#
#   scripts/with-db.sh PORT command [args...]
set -euo pipefail
cd "$(dirname "$0")/.."

port=${1:?usage: with-db.sh PORT command [args...]}
shift
scripts/install-deps.sh
datadir=$(mktemp -d /tmp/caregiver-push-pg.XXXXXX)
cleanup() {
    scripts/pg.sh stop "$datadir"
    rm -rf "$datadir"
}
trap cleanup EXIT
# TEST_FAKETIME (scripts/test.sh's TEST_AT): the server's clock shifted like the tests' (docs/development.md#fixed-instant).
if [ -n "${TEST_FAKETIME:-}" ]; then
    LD_PRELOAD=$TEST_FAKETIME_LIB FAKETIME=$TEST_FAKETIME FAKETIME_DONT_FAKE_MONOTONIC=1 \
        scripts/pg.sh start "$datadir" "$port"
else
    scripts/pg.sh start "$datadir" "$port"
fi
DATABASE_URL=$(scripts/pg.sh url "$port")
export DATABASE_URL
"$@"
