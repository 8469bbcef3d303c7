#!/usr/bin/env bash
# Contract checks (part of `make test`, before the Swift suite): the OpenAPI document is valid; its routes, the
# function table's and the SAM template's are the same set; the descriptors (SAM, Knative, Dockerfile) say what the
# code reads (Tests/Contract/check_descriptors.py); the SAM template passes cfn-lint; and schemathesis
# (all checks, 300 examples per operation) finds nothing against a warm `runner serve` with valid caregiver and
# patient tokens. Needs DATABASE_URL and the built binaries' directory as $1.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:?usage: contract.sh BIN_DIR}

# The Python tools live in a venv of their own under .build/, pinned, so that what happens to be installed on the
# machine (or missing from it) changes nothing: `pip show a b c d` succeeds when any one is installed, which once
# skipped schemathesis on a machine that had PyYAML. Each pinned requirement is checked by its installed version.
venv=.build/contract-venv
requirements=(schemathesis==4.32.5 openapi-spec-validator==0.9.0 cfn-lint==1.51.0 PyYAML==6.0.3)
python=$PWD/$venv/bin/python
venv_ready() {
    [ -x "$python" ] || return 1
    local requirement
    for requirement in "${requirements[@]}"; do
        [ "$("$python" -m pip show "${requirement%%==*}" 2>/dev/null | sed -n 's/^Version: //p')" = "${requirement##*==}" ] \
            || return 1
    done
}
if ! venv_ready; then
    echo "contract: installing ${requirements[*]} into $venv" >&2
    python3 -m venv --clear "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check --retries 2 --timeout 30 "${requirements[@]}"
    venv_ready || { echo "contract: $venv does not hold ${requirements[*]}" >&2; exit 1; }
fi
"$python" -m openapi_spec_validator infra/openapi.yaml
"$python" Tests/Contract/check_routes.py
# The descriptors against the code: every variable deployable, the table's limits in SAM and Knative, each function's
# secrets and IAM, the Dockerfile against Package.swift, and each function's environment size (under Lambda's 4 KB).
"$python" Tests/Contract/check_descriptors.py
"$python" -c 'import sys; from cfnlint.runner import main; sys.argv = ["cfn-lint", "infra/aws/template.yaml", "infra/aws/edge-waf.yaml"]; sys.exit(main())'
echo "cfn-lint: infra/aws/template.yaml, infra/aws/edge-waf.yaml OK"

"$bin/runner" migrate --migrations infra/migrations
# The functions connect as the runtime role, as deployed (docs/deploy.md#roles); the owner migrates and seeds.
"$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)/psql" -q -v ON_ERROR_STOP=1 "$DATABASE_URL" \
    -c 'ALTER ROLE caregiver_push_runtime LOGIN'
export SUPABASE_JWT_SECRET="contract-run-secret-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export PUSH_ENVIRONMENT=DEV
CAREGIVER_TOKEN=$("$bin/runner" token)
PATIENT_TOKEN=$("$python" Tests/Contract/patient_session.py)
export CAREGIVER_TOKEN PATIENT_TOKEN
DATABASE_URL=$(echo "$DATABASE_URL" | sed -E 's#^([a-z]+://)[^@/]*@#\1caregiver_push_runtime@#')
export DATABASE_URL

source scripts/runner-lib.sh
start_runner "$(mktemp -d /tmp/caregiver-push-contract.XXXXXX)" "$bin/runner" --mode warm --fcm-emulator \
    --functions infra/functions.json --bin-dir "$bin"
# A fixed seed keeps the gate deterministic; run `st run` without it locally to explore further.
(cd infra/contract && "$python" -m schemathesis.cli run ../openapi.yaml --url "http://127.0.0.1:$port" --checks all \
    --seed "${SCHEMATHESIS_SEED:-20261122}" --no-color \
    ${LEAK_CAPTURE_DIR:+--report har --report-har-path "$LEAK_CAPTURE_DIR/schemathesis.har"})
