#!/usr/bin/env bash
# Contract checks (part of `make test`, before the Swift suite): the OpenAPI document is valid; its routes, the
# function table's and the SAM template's are the same set; the SAM template passes cfn-lint; and schemathesis
# (all checks, 300 examples per operation) finds nothing against a warm `runner serve` with valid caregiver and
# patient tokens. Needs DATABASE_URL and the built binaries' directory as $1.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:?usage: contract.sh BIN_DIR}

python3 -m pip show schemathesis openapi-spec-validator cfn-lint pyyaml >/dev/null 2>&1 \
    || python3 -m pip install -q schemathesis openapi-spec-validator cfn-lint pyyaml
python3 -m openapi_spec_validator infra/openapi.yaml
python3 Tests/Contract/check_routes.py
# cfn-lint through its entry point: the pip shim may not be on PATH until pyenv rehashes.
python3 -c 'import sys; from cfnlint.runner import main; sys.argv = ["cfn-lint", "infra/aws/template.yaml"]; sys.exit(main())'
echo "cfn-lint: infra/aws/template.yaml OK"

"$bin/runner" migrate --migrations infra/migrations
export SUPABASE_JWT_SECRET="contract-run-secret-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export PUSH_ENVIRONMENT=DEV
CAREGIVER_TOKEN=$("$bin/runner" token)
PATIENT_TOKEN=$(python3 Tests/Contract/patient_session.py)
export CAREGIVER_TOKEN PATIENT_TOKEN

source scripts/runner-lib.sh
start_runner "$(mktemp -d /tmp/caregiver-push-contract.XXXXXX)" "$bin/runner" --mode warm --fcm-emulator \
    --functions infra/functions.json --bin-dir "$bin"
# A fixed seed keeps the gate deterministic; run `st run` without it locally to explore further.
(cd infra/contract && python3 -m schemathesis.cli run ../openapi.yaml --url "http://127.0.0.1:$port" --checks all \
    --seed "${SCHEMATHESIS_SEED:-20261122}" --no-color \
    ${LEAK_CAPTURE_DIR:+--report har --report-har-path "$LEAK_CAPTURE_DIR/schemathesis.har"})
