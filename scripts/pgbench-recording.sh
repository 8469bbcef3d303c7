#!/usr/bin/env bash
# A patient's dose-record as its statements reach PostgreSQL, against the same work as one PL/pgSQL call: what
# folding a recording's statements into one call saves the database (docs/decisions.md#one-call-per-recording;
# shipped for dose-record as record_dose, the last variant). pgbench, one client, the extended protocol with unnamed statements (as the functions send
# every statement behind a transaction pooler), each flight a pipeline (\startpipeline … \endpipeline: one Sync,
# one round trip, as PipelinedTransaction sends it); every transaction records a new dose and queues its push for
# three devices of two caregivers (the sweep sends first: the deliveries are queued, not leased). Variants: as the
# functions send it now; the COMMIT in the writes' flight; the session's look-up as now, then the recording as one
# call; the same with the outbox still a statement of its own and COMMIT in its own flight (a first step that keeps
# the flights' shape); all of it one call; record_dose as dose-record sends it (COMMIT alone). Prints, per variant and round, recordings/s and the server's CPU per recording (the
# whole cluster's utime + stime from /proc, the exited backend's counted by the postmaster, taken around the run).
# Run against a throwaway PostgreSQL after a release build of the gateway (it migrates):
#
#   scripts/with-db.sh PORT scripts/pgbench-recording.sh [SECONDS] [ROUNDS]
#
# Each round runs every variant once, in an order turned by one each round, so that none is always first (the
# tables grow as the run goes); the summary is each variant's median over the rounds.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-10}
rounds=${2:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pgbench=$(ls /usr/lib/postgresql/*/bin/pgbench | tail -1)
MIGRATIONS_DIR=infra/migrations .build/release/gateway migrate >/dev/null 2>&1
psql "$DATABASE_URL" -q -v ON_ERROR_STOP=1 <<'SQL'
SET search_path = caregiver_push;
INSERT INTO patients (id, display_name)
    SELECT ('00000000-0000-0000-0000-' || lpad(i::text, 12, '0'))::uuid, 'p' FROM generate_series(1, 2000) i;
INSERT INTO patient_sessions (patient_id, token_hash, expires_at)
    SELECT id, sha256(convert_to(id::text, 'UTF8')), now() + interval '1 day' FROM patients;
INSERT INTO medications (id, patient_id, name, start_date)
    SELECT ('10000000' || substr(id::text, 9))::uuid, id, 'm', '2020-01-01' FROM patients;
INSERT INTO medication_schedule_times (medication_id, time_of_day) SELECT id, '08:00' FROM medications;
INSERT INTO caregiver_patient_links (caregiver_id, patient_id)
    SELECT gen_random_uuid(), id FROM patients, generate_series(1, 2);
INSERT INTO push_devices (owner_type, owner_id, token, token_sha256, platform, environment)
    SELECT 'CAREGIVER', l.caregiver_id, t, sha256(convert_to(t, 'UTF8')), 'ios', 'DEV'
    FROM caregiver_patient_links l,
         LATERAL (SELECT l.caregiver_id::text || '-' || n AS t
                  FROM generate_series(1, CASE WHEN l.caregiver_id::text < '8' THEN 2 ELSE 1 END) n) d;
ANALYZE;
ALTER ROLE caregiver_push_runtime LOGIN;
-- Every variant writes the same rows; autovacuum, which would run in whichever variant's turn the tables' growth
-- happened to trigger it, is off, so that each variant's figure is its own work.
ALTER SYSTEM SET autovacuum = off;
SELECT pg_reload_conf();

-- The prototype: a patient's dose-record in one call (its session, the medication, the schedule time, the insert,
-- the record as stored and the outbox), returning what the function would answer with.
CREATE FUNCTION caregiver_push.record_dose_probe(
    session_hash bytea, known_patient uuid, at_instant timestamptz, medication uuid, scheduled timestamptz, taken timestamptz,
    at_time time, record uuid, new_event_key text, event_date date, event_slot text, on_time boolean)
RETURNS TABLE (outcome text, stored_id text, stored_taken_at text, stored_group_id text)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $probe$
#variable_conflict use_column
DECLARE
    patient uuid;
    med record;
    inserted boolean;
BEGIN
    -- The session's patient, unless the caller looked the session up already (known_patient).
    patient := known_patient;
    IF session_hash IS NOT NULL THEN
        SELECT s.patient_id INTO patient FROM caregiver_push.patient_sessions s
        WHERE s.token_hash = session_hash AND s.revoked_at IS NULL AND s.expires_at > at_instant;
    END IF;
    IF patient IS NULL THEN
        outcome := 'unauthorized'; RETURN NEXT; RETURN;
    END IF;
    SELECT m.is_prn, m.start_date, m.end_date, m.archived_at IS NOT NULL AS archived,
           EXISTS (SELECT 1 FROM caregiver_push.medication_schedule_times t
                   WHERE t.medication_id = m.id AND t.time_of_day = at_time) AS scheduled_time
    INTO med FROM caregiver_push.medications m WHERE m.id = medication AND m.patient_id = patient;
    IF NOT FOUND OR NOT med.scheduled_time THEN
        outcome := 'invalid'; RETURN NEXT; RETURN;
    END IF;
    INSERT INTO caregiver_push.dose_records
        (id, patient_id, medication_id, scheduled_at, taken_at, recorded_by_role, recorded_by_id)
    VALUES (record, patient, medication, scheduled, taken, 'PATIENT', patient)
    ON CONFLICT (patient_id, medication_id, scheduled_at) DO NOTHING;
    inserted := FOUND;
    SELECT r.id::text, r.taken_at::text, r.recording_group_id::text INTO stored_id, stored_taken_at, stored_group_id
    FROM caregiver_push.dose_records r
    WHERE r.patient_id = patient AND r.medication_id = medication AND r.scheduled_at = scheduled;
    -- The outbox, unless the caller sends it as a statement of its own (new_event_key NULL).
    IF inserted AND new_event_key IS NOT NULL THEN
        PERFORM caregiver_push.enqueue_dose_taken(
            'dose', record::text, new_event_key, 'dose-record', patient::text, event_date, event_slot, NULL,
            on_time, taken, 'PATIENT', NULL, 'DEV', 270, 10, NULL, 0);
    END IF;
    outcome := CASE WHEN inserted THEN 'recorded' ELSE 'unchanged' END;
    RETURN NEXT;
END
$probe$;
GRANT EXECUTE ON FUNCTION caregiver_push.record_dose_probe(
    bytea, uuid, timestamptz, uuid, timestamptz, timestamptz, time, uuid, text, date, text, boolean)
    TO caregiver_push_runtime;
SQL
RT=$(echo "$DATABASE_URL" | sed 's#postgres@#caregiver_push_runtime@#')

# What every variant shares: a random patient and a day it has not recorded yet (most of the time).
cat >"$work/common.sql" <<'Q'
\set p random(1, 2000)
\set d random(0, 99999)
Q
# Statement fragments (psql-style :variables are pgbench's).
patient="('00000000-0000-0000-0000-' || lpad(:p::text, 12, '0'))"
medication="('10000000-0000-0000-0000-' || lpad(:p::text, 12, '0'))"
record="('20000000-0000-0000-' || lpad(:p::text, 4, '0') || '-' || lpad(:d::text, 12, '0'))"
scheduled="('2020-01-01 08:00:00+00'::timestamptz + make_interval(days => :d))"
hash="sha256(convert_to($patient, 'UTF8'))"
bounds='SET LOCAL lock_timeout = 2000;
SET LOCAL statement_timeout = 5000;
SET LOCAL idle_in_transaction_session_timeout = 7000;'
auth="\\startpipeline
BEGIN READ ONLY;
$bounds
SELECT * FROM caregiver_push.find_patient_session($hash, '2026-11-29T10:00:00Z'::text);
COMMIT;
\\endpipeline"
reads="BEGIN;
$bounds
SELECT * FROM caregiver_push.find_medication($medication::text, $patient::text);
SELECT * FROM caregiver_push.find_schedule_time($medication::text, '08:00'::time);"
writes="INSERT INTO caregiver_push.dose_records (id, patient_id, medication_id, scheduled_at, taken_at, recorded_by_role, recorded_by_id) VALUES ($record::uuid, $patient::uuid, $medication::uuid, $scheduled, $scheduled, 'PATIENT', $patient::uuid) ON CONFLICT (patient_id, medication_id, scheduled_at) DO NOTHING RETURNING id;
SELECT * FROM caregiver_push.find_dose_record($patient::text, $medication::text, ($scheduled)::text);
SELECT * FROM caregiver_push.enqueue_dose_taken('dose'::text, $record::text, ('probe-' || :p || '-' || :d)::text, 'dose-record'::text, $patient::text, ($scheduled)::date, 'morning'::text, NULL::text, true, $scheduled, 'PATIENT'::text, NULL::uuid, 'DEV'::text, 270, 10, NULL::uuid, 0::double precision);"
{
    cat "$work/common.sql"
    printf '%s\n\\startpipeline\n%s\n\\endpipeline\n\\startpipeline\n%s\n\\endpipeline\n\\startpipeline\nCOMMIT;\n\\endpipeline\n' \
        "$auth" "$reads" "$writes"
} >"$work/now.sql"
{
    cat "$work/common.sql"
    printf '%s\n\\startpipeline\n%s\n\\endpipeline\n\\startpipeline\n%s\nCOMMIT;\n\\endpipeline\n' \
        "$auth" "$reads" "$writes"
} >"$work/commit-in-writes.sql"
# The probe's call: in place of the session's look-up (the one-call variant) or after it (auth-then-one-call).
probe() { # session-hash-expression known-patient-expression [event-key-expression]
    printf 'SELECT * FROM caregiver_push.record_dose_probe(%s, %s, %s, %s::uuid, %s, %s, %s, %s::uuid, %s, (%s)::date, %s, true);' \
        "$1" "$2" "'2026-11-29T10:00:00Z'" "$medication" "$scheduled" "$scheduled" "'08:00'" "$record" \
        "${3:-('probe-' || :p || '-' || :d)}" "$scheduled" "'morning'"
}
# A first step that keeps the flights' shape: the session's look-up as now; the reads and the insert as one call
# and the outbox statement as now, in one flight; COMMIT in a flight of its own (after the function's checks).
outbox=${writes##*$'\n'}
{
    cat "$work/common.sql"
    printf '%s\n\\startpipeline\nBEGIN;\n%s\n%s\n%s\n\\endpipeline\n\\startpipeline\nCOMMIT;\n\\endpipeline\n' \
        "$auth" "$bounds" "$(probe NULL "$patient::uuid" NULL::text)" "$outbox"
} >"$work/reads-and-insert-one-call.sql"
{
    cat "$work/common.sql"
    printf '\\startpipeline\nBEGIN;\n%s\n%s\nCOMMIT;\n\\endpipeline\n' "$bounds" "$(probe "$hash" NULL)"
} >"$work/one-call.sql"
{
    cat "$work/common.sql"
    printf '%s\n\\startpipeline\nBEGIN;\n%s\n%s\nCOMMIT;\n\\endpipeline\n' "$auth" "$bounds" \
        "$(probe NULL "$patient::uuid")"
} >"$work/auth-then-one-call.sql"

# As shipped for dose-record (migration 000022): the session's look-up as now, then record_dose in the first flight
# (the link, the medication's checks, the insert, the record as stored, the outbox) and COMMIT in a flight of its
# own. Every dose date is today or before ('2300-01-01' stands for today), and on the medication's dates.
{
    cat "$work/common.sql"
    printf '%s\n\\startpipeline\nBEGIN;\n%s\n%s\n\\endpipeline\n\\startpipeline\nCOMMIT;\n\\endpipeline\n' "$auth" "$bounds" \
        "SELECT * FROM caregiver_push.record_dose(NULL, $patient::text, $medication::text, ($scheduled)::text, ($scheduled)::text, '08:00'::time, ($scheduled)::date, '2300-01-01'::date, true, $record::text, 'PATIENT', $patient::text, ('probe-' || :p || '-' || :d)::text, 'morning', true, $scheduled, 'PATIENT', NULL, 'DEV', 270, 10, NULL, 0);"
} >"$work/record-dose.sql"

# The cluster's CPU in clock ticks: the postmaster's own and its reaped children's (a backend that exited is counted
# there), plus every live child's.
postmaster=$(ps -o ppid= -p "$(psql "$DATABASE_URL" -Atc \
    "SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'")" | tr -d ' ')
cluster_cpu() {
    local total
    total=$(awk '{print $14 + $15 + $16 + $17}' "/proc/$postmaster/stat")
    for child in $(pgrep -P "$postmaster"); do
        total=$((total + $(awk '{print $14 + $15}' "/proc/$child/stat" 2>/dev/null || echo 0)))
    done
    echo "$total"
}
ticks=$(getconf CLK_TCK)
echo "| variant | round | recordings/s | PostgreSQL CPU ms per recording |"
echo "|---|---:|---:|---:|"
variants=(now commit-in-writes reads-and-insert-one-call auth-then-one-call one-call record-dose)
for round in $(seq "$rounds"); do
    for turn in "${!variants[@]}"; do
        variant=${variants[$(((turn + round - 1) % ${#variants[@]}))]}
        before=$(cluster_cpu)
        "$pgbench" -n -M extended -c 1 -T "$seconds" -f "$work/$variant.sql" "$RT" >"$work/out" 2>&1 ||
            { cat "$work/out" >&2; exit 1; }
        # The backend has exited once pgbench has; the postmaster counts its CPU when it has reaped it.
        for _ in $(seq 50); do
            [ "$(psql "$DATABASE_URL" -Atc "SELECT count(*) FROM pg_stat_activity WHERE usename = 'caregiver_push_runtime'")" = 0 ] && break
            sleep 0.1
        done
        sleep 0.2
        after=$(cluster_cpu)
        done_count=$(awk '/number of transactions actually processed/ {print $NF}' "$work/out" | cut -d/ -f1)
        failed=$(awk '/number of failed transactions/ {print $5}' "$work/out")
        tps=$(awk '/^tps/ {print $3}' "$work/out")
        cpu=$(python3 -c "print(f'{($after - $before) * 1000 / $ticks / $done_count:.3f}')")
        echo "| $variant | $round | $tps | $cpu |${failed:+ failed: $failed}"
        echo "$variant $cpu" >>"$work/cpu"
    done
done
psql "$DATABASE_URL" -Atc "SELECT 'deliveries queued per dose recorded: ' || round((SELECT count(*) FROM caregiver_push.push_deliveries)::numeric / (SELECT count(*) FROM caregiver_push.dose_records), 2)"
echo
echo "| variant | median PostgreSQL CPU ms per recording | ÷ now |"
echo "|---|---:|---:|"
python3 - "$work/cpu" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    variant, cpu = line.split()
    rows.setdefault(variant, []).append(float(cpu))
now = statistics.median(rows["now"])
for variant, values in rows.items():
    median = statistics.median(values)
    print(f"| {variant} | {median:.3f} | {median / now:.2f} |")
PY
