#!/usr/bin/env bash
# The recording's reads as statements against the same reads as the PL/pgSQL calls of migration 000021
# (docs/decisions.md#recording-reads): pgbench, one client, each sent as an unnamed statement with the extended
# protocol (as the functions send every statement behind a transaction pooler), 5 s each, two rounds; prints
# statements per second. Run against a throwaway PostgreSQL after a release build of the gateway (it migrates):
#
#   scripts/with-db.sh PORT scripts/pgbench-reads.sh
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pgbench=$(ls /usr/lib/postgresql/*/bin/pgbench | tail -1)
MIGRATIONS_DIR=infra/migrations .build/release/gateway migrate >/dev/null 2>&1
psql "$DATABASE_URL" -q <<'SQL'
INSERT INTO caregiver_push.patients (id, display_name) SELECT ('00000000-0000-0000-0000-' || lpad(i::text, 12, '0'))::uuid, 'p' FROM generate_series(1,2000) i;
INSERT INTO caregiver_push.patient_sessions (patient_id, token_hash, expires_at) SELECT id, sha256(id::text::bytea), now() + interval '1 day' FROM caregiver_push.patients;
INSERT INTO caregiver_push.medications (patient_id, name, start_date) SELECT id, 'm', '2020-01-01' FROM caregiver_push.patients, generate_series(1,3);
INSERT INTO caregiver_push.medication_schedule_times (medication_id, time_of_day) SELECT id, t FROM caregiver_push.medications, (VALUES ('08:00'::time), ('20:00'::time)) v(t);
INSERT INTO caregiver_push.caregiver_patient_links (caregiver_id, patient_id) SELECT gen_random_uuid(), id FROM caregiver_push.patients;
ANALYZE;
ALTER ROLE caregiver_push_runtime LOGIN;
SQL
P=00000000-0000-0000-0000-000000000007
M=$(psql "$DATABASE_URL" -Atc "SELECT id FROM caregiver_push.medications WHERE patient_id = '$P' LIMIT 1")
C=$(psql "$DATABASE_URL" -Atc "SELECT caregiver_id FROM caregiver_push.caregiver_patient_links WHERE patient_id = '$P'")
H=$(psql "$DATABASE_URL" -Atc "SELECT token_hash FROM caregiver_push.patient_sessions WHERE patient_id = '$P'")
RT=$(echo "$DATABASE_URL" | sed 's#postgres@#caregiver_push_runtime@#')
cat > $work/s_plain.sql <<Q
SELECT id, patient_id FROM caregiver_push.patient_sessions WHERE token_hash = '$H' AND revoked_at IS NULL AND expires_at > '2026-11-28T10:00:00Z';
Q
cat > $work/s_fn.sql <<Q
SELECT * FROM caregiver_push.find_patient_session('$H'::bytea, '2026-11-28T10:00:00Z'::text);
Q
cat > $work/m_plain.sql <<Q
SELECT is_prn, start_date::date::text, end_date::date::text, archived_at IS NOT NULL FROM caregiver_push.medications WHERE id = '$M' AND patient_id = '$P';
Q
cat > $work/m_fn.sql <<Q
SELECT * FROM caregiver_push.find_medication('$M'::text, '$P'::text);
Q
cat > $work/d_plain.sql <<Q
SELECT m.id, (extract(hour FROM t.time_of_day) * 60 + extract(minute FROM t.time_of_day))::int FROM caregiver_push.medications m JOIN caregiver_push.medication_schedule_times t ON t.medication_id = m.id WHERE m.patient_id = '$P' AND m.archived_at IS NULL AND NOT m.is_prn AND m.start_date <= '2026-11-28'::date AND (m.end_date IS NULL OR m.end_date >= '2026-11-28'::date) ORDER BY m.id, t.time_of_day;
Q
cat > $work/d_fn.sql <<Q
SELECT * FROM caregiver_push.find_scheduled_doses('$P'::text, '2026-11-28'::date);
Q
cat > $work/l_plain.sql <<Q
SELECT 1 FROM caregiver_push.caregiver_patient_links WHERE caregiver_id = '$C' AND patient_id = '$P' AND revoked_at IS NULL;
Q
cat > $work/l_fn.sql <<Q
SELECT * FROM caregiver_push.find_active_link('$C'::text, '$P'::text);
Q
echo "read variant statements/s"
for round in 1 2; do
for q in s m d l; do
  for v in plain fn; do
    tps=$("$pgbench" -n -M extended -c 1 -T 5 -f $work/${q}_$v.sql "$RT" 2>/dev/null | grep "^tps" | awk '{print $3}')
    echo "$q $v $tps"
  done
done
done
