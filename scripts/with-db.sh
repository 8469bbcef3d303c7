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
scripts/pg.sh start "$datadir" "$port"
DATABASE_URL=$(scripts/pg.sh url "$port")
export DATABASE_URL
"$@"
