#!/usr/bin/env bash
# `make soak`: the load and fault suite for a long time (LOAD_SECONDS, default 300; LOAD_CLIENTS, default 8), then
# wrk against the warm runner (push-register, new token per request, SOAK_WRK_SECONDS, default 60): zero non-200
# answers, zero socket errors, and exactly one stored device per answered request.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--inside" ]; then
    swift build
    bin=$(swift build --show-bin-path)
    export FUNCTIONS_BIN_DIR=$bin LOAD_SECONDS=${LOAD_SECONDS:-300} LOAD_CLIENTS=${LOAD_CLIENTS:-8}
    swift test --filter LoadAndFaultTests

    "$bin/runner" migrate --migrations infra/migrations
    export SUPABASE_JWT_SECRET="soak-secret-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')" PUSH_ENVIRONMENT=DEV
    caregiver=$(python3 -c 'import uuid; print(uuid.uuid4())')
    CAREGIVER_TOKEN=$("$bin/runner" token --caregiver "$caregiver")
    export CAREGIVER_TOKEN
    source scripts/runner-lib.sh
    start_runner "$(mktemp -d /tmp/caregiver-push-soak.XXXXXX)" "$bin/runner" --mode warm --fcm-emulator \
        --functions infra/functions.json --bin-dir "$bin"
    # (Not `tee /dev/stderr`: reopening stderr truncates it when it is redirected to a file.)
    report=$(wrk -t2 -c10 -d"${SOAK_WRK_SECONDS:-60}s" --timeout 10s -s scripts/wrk-register.lua "http://127.0.0.1:$port")
    echo "$report"
    summary=$(echo "$report" | grep '^wrk:')
    stored=$(psql "$DATABASE_URL" -qAt -c "SELECT count(*) FROM push_devices WHERE owner_id = '$caregiver'")
    echo "soak: $summary stored=$stored"
    python3 - "$summary" "$stored" <<'PY'
import sys
fields = dict(part.split("=") for part in sys.argv[1].split()[1:])
ok, stored = int(fields["ok"]), int(sys.argv[2])
problems = []
if int(fields["non200"]) or int(fields["socket_errors"]):
    problems.append("non-200 answers or socket errors")
# Requests in flight when wrk stopped may have been stored without being counted: at most one per connection.
if not ok <= stored <= ok + 10:
    problems.append(f"{stored} devices stored for {ok} answered registrations")
if problems:
    sys.exit("soak: FAILED: " + "; ".join(problems))
print("soak: wrk phase clean")
PY
else
    command -v wrk >/dev/null || scripts/install-deps.sh --soak
    exec scripts/with-db.sh "${SOAK_PG_PORT:-25438}" scripts/soak.sh --inside
fi
