#!/usr/bin/env bash
# Prints how to invoke the functions against the local database that `make dev` started.
set -euo pipefail
cd "$(dirname "$0")/.."
db_url=${1:?database url}
bin=$(swift build --show-bin-path)
secret_file=.data/dev-jwt-secret
[ -s "$secret_file" ] || head -c 32 /dev/urandom | base64 | tr -d '\n=' >"$secret_file"
secret=$(cat "$secret_file")
caregiver=11111111-1111-4111-8111-111111111111
token=$(SUPABASE_JWT_SECRET="$secret" "$bin/runner" token --caregiver "$caregiver")

cat <<INFO

Local stack ready: PostgreSQL on ${db_url} (data in .data/postgres; 'make db-stop' stops it).

Set up a shell:
  export DATABASE_URL='${db_url}'
  export SUPABASE_JWT_SECRET='${secret}'
  export PUSH_ENVIRONMENT=DEV
  export CAREGIVER_TOKEN='${token}'    # caregiver ${caregiver}, valid 24 h

Register a phone, then unregister it (fixtures in Tests/Fixtures, placeholders filled by sed):
  sed -e "s/\\\${CAREGIVER_TOKEN}/\$CAREGIVER_TOKEN/" -e 's/\${DEVICE_TOKEN}/demo-device-token-1/' \\
      -e 's/\${INSTALLATION_ID}/demo-install/' Tests/Fixtures/push-register/valid.json | ${bin}/runner invoke push-register
  sed -e "s/\\\${CAREGIVER_TOKEN}/\$CAREGIVER_TOKEN/" -e 's/\${DEVICE_TOKEN}/demo-device-token-1/' \\
      Tests/Fixtures/push-unregister/valid.json | ${bin}/runner invoke push-unregister

See the device row:
  psql '${db_url}' -c 'SELECT owner_id, platform, environment, is_enabled, disabled_reason FROM push_devices'
INFO
