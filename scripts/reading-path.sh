#!/usr/bin/env bash
# The reading path of one request, measured: `dose-record` in one-shot stdin mode with a caregiver token, a dose
# recorded for the first time (so a push is owed) against a throwaway PostgreSQL and the FCM emulator. gdb stops at
# the first entry of every function defined in the project's own source (Functions/, Shared/) and writes them in
# the order they were first entered (scripts/reading-path.gdb.py); scripts/reading-path.py counts the files a
# newcomer opens and the jumps back into a file already open, to stdout and through the push.
#
#   scripts/reading-path.sh [OUTPUT]     the report (default bench-out/reading-path.md); needs a debug build
set -euo pipefail
cd "$(dirname "$0")/.."
output=${1:-bench-out/reading-path.md}
mkdir -p "$(dirname "$output")"
bin=$(swift build --show-bin-path)
for executable in dose-record push-register gateway runner; do
    [ -x "$bin/$executable" ] || { echo "reading-path: build first (swift build): no $bin/$executable" >&2; exit 1; }
done
command -v gdb >/dev/null || { echo "reading-path: gdb is needed (apt-get install gdb)" >&2; exit 1; }
port=${READING_PATH_PG_PORT:-25499}
exec scripts/with-db.sh "$port" bash -c '
set -euo pipefail
bin=$1 output=$2
work=$(mktemp -d /tmp/caregiver-push-reading.XXXXXX)
trap "kill \$emulator 2>/dev/null || true; rm -rf \$work" EXIT
free_port() { python3 -c "import socket; s = socket.socket(); s.bind((\"127.0.0.1\", 0)); print(s.getsockname()[1])"; }
psql=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)/psql
"$bin/gateway" migrate >/dev/null
password=$(python3 -c "import secrets; print(secrets.token_hex(16))")
"$psql" "$DATABASE_URL" -qAt -v ON_ERROR_STOP=1 <<SQL >/dev/null
ALTER ROLE caregiver_push_runtime LOGIN PASSWORD '"'"'$password'"'"';
INSERT INTO caregiver_push.patients (id, display_name) VALUES ('"'"'33333333-3333-4333-8333-000000000001'"'"', '"'"'P'"'"');
INSERT INTO caregiver_push.caregiver_patient_links (caregiver_id, patient_id)
    VALUES ('"'"'22222222-2222-4222-8222-000000000001'"'"', '"'"'33333333-3333-4333-8333-000000000001'"'"');
INSERT INTO caregiver_push.medications (id, patient_id, name, start_date)
    VALUES ('"'"'44444444-4444-4444-8444-000000000001'"'"', '"'"'33333333-3333-4333-8333-000000000001'"'"', '"'"'M'"'"', '"'"'2020-01-01'"'"');
INSERT INTO caregiver_push.medication_schedule_times (medication_id, time_of_day)
    VALUES ('"'"'44444444-4444-4444-8444-000000000001'"'"', '"'"'08:00'"'"');
SQL
runtime_url=$(python3 -c "
import sys, urllib.parse as u
p = u.urlsplit(sys.argv[1])
print(u.urlunsplit((p.scheme, \"caregiver_push_runtime:\" + sys.argv[2] + \"@\" + p.hostname + \":\" + str(p.port), p.path, p.query, \"\")))
" "$DATABASE_URL" "$password")
# A service account for the emulator: its key signs the OAuth assertion, the emulator checks it with the public half.
fcm_port=$(free_port)
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$work/key.pem" 2>/dev/null
python3 - "$work/key.pem" "$fcm_port" >"$work/account.json" <<PY
import json, sys
print(json.dumps({"type": "service_account", "project_id": "reading-path", "private_key_id": "k1",
    "private_key": open(sys.argv[1]).read(), "client_email": "reading@reading-path.iam.gserviceaccount.com",
    "token_uri": "http://127.0.0.1:%s/token" % sys.argv[2]}))
PY
"$bin/runner" fcm-emulator --service-account "$work/account.json" --port "$fcm_port" >"$work/emulator.log" 2>&1 &
emulator=$!
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$fcm_port/" && break; sleep 0.1; done
export SUPABASE_JWT_SECRET=$(python3 -c "import secrets; print(secrets.token_hex(32))")
export DATABASE_URL=$runtime_url PUSH_ENVIRONMENT=DEV FCM_SERVICE_ACCOUNT_FILE=$work/account.json
export FCM_API_BASE_URL=http://127.0.0.1:$fcm_port LOG_LEVEL=error
token=$("$bin/runner" token --caregiver 22222222-2222-4222-8222-000000000001)
event() {
    python3 - "$1" "$token" "$2" <<PY
import json, sys
path, token, body = sys.argv[1], sys.argv[2], sys.argv[3]
print(json.dumps({"version": "2.0", "routeKey": "POST " + path, "rawPath": path,
    "headers": {"authorization": "Bearer " + token, "content-type": "application/json"},
    "requestContext": {"requestId": "reading-path", "http": {"method": "POST", "path": path}},
    "body": body, "isBase64Encoded": False}))
PY
}
# The caregiver phone the push goes to (registered through push-register itself, not traced).
event /api/push/register "{\"token\":\"reading-path-device-token\",\"platform\":\"ios\",\"environment\":\"DEV\"}" \
    | "$bin/push-register" >"$work/register.out" 2>/dev/null
grep -q "\"statusCode\":200" "$work/register.out" || { echo "reading-path: register failed: $(cat $work/register.out)" >&2; exit 1; }
yesterday=$(TZ=Asia/Tokyo date -d yesterday +%F)
event /api/dose-records "{\"patientId\":\"33333333-3333-4333-8333-000000000001\",\"medicationId\":\"44444444-4444-4444-8444-000000000001\",\"scheduledAt\":\"${yesterday}T08:00:00+09:00\"}" >"$work/event.json"
nm --defined-only -l "$bin/dose-record" >"$work/functions.txt" 2>/dev/null
NM_LIST=$work/functions.txt TRACE_OUT=$work/trace.txt gdb -batch -ex "set pagination off" -ex "set confirm off" -x scripts/reading-path.gdb.py \
    -ex "run < $work/event.json > $work/response.json" "$bin/dose-record" >"$work/gdb.log" 2>&1
grep -q "\"statusCode\":200" "$work/response.json" || { echo "reading-path: dose-record did not answer 200: $(cat $work/response.json)" >&2; exit 1; }
cp "$work/trace.txt" "${output%.md}.trace"
python3 scripts/reading-path.py "$work/trace.txt" >"$output"
cat "$output"
' reading-path "$bin" "$output"
