#!/usr/bin/env bash
# Contract checks (part of `make test`, before the Swift suite): the OpenAPI document is valid; its routes, the
# function table's and the SAM template's are the same set; the descriptors (SAM, Knative, Dockerfile) say what the
# code reads (Tests/Contract/check_descriptors.py); the Knative manifests use only what a default Knative Serving
# accepts and render per stage as docs/deploy.md says (Tests/Contract/check_knative.py); the SAM template passes
# cfn-lint; checkov finds nothing in infra/ (each check that does not apply is skipped in the descriptor itself, with
# its reason); and schemathesis
# (all checks, 300 examples per operation) finds nothing against a warm `runner serve` with valid caregiver and
# patient tokens. Needs DATABASE_URL and the built binaries' directory as $1.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:?usage: contract.sh BIN_DIR}

# The Python tools live in a venv of their own under .build/, pinned, so that what happens to be installed on the
# machine (or missing from it) changes nothing: `pip show a b c d` succeeds when any one is installed, which once
# skipped schemathesis on a machine that had PyYAML. Each pinned requirement is checked by its installed version.
# checkov has a venv of its own: its pinned dependencies are not schemathesis's (about 300 MB, a minute or two to
# install on a fresh machine; then reused).
venv_ready() {  # VENV REQUIREMENT…
    local venv=$1 requirement
    shift
    [ -x "$venv/bin/python" ] || return 1
    for requirement in "$@"; do
        [ "$("$venv/bin/python" -m pip show "${requirement%%==*}" 2>/dev/null | sed -n 's/^Version: //p')" \
            = "${requirement##*==}" ] || return 1
    done
}
ensure_venv() {  # VENV REQUIREMENT…
    local venv=$1
    shift
    if ! venv_ready "$venv" "$@"; then
        echo "contract: installing $* into $venv" >&2
        python3 -m venv --clear "$venv"
        "$venv/bin/pip" install --quiet --disable-pip-version-check --retries 2 --timeout 30 "$@"
        venv_ready "$venv" "$@" || { echo "contract: $venv does not hold $*" >&2; exit 1; }
    fi
}
requirements=(schemathesis==4.32.5 openapi-spec-validator==0.9.0 cfn-lint==1.51.0 PyYAML==6.0.3)
ensure_venv .build/contract-venv "${requirements[@]}"
python=$PWD/.build/contract-venv/bin/python
checkov_requirements=(checkov==3.3.30)
ensure_venv .build/checkov-venv "${checkov_requirements[@]}"
"$python" -m openapi_spec_validator infra/openapi.yaml
"$python" Tests/Contract/check_routes.py
# The descriptors against the code: every variable deployable, the table's limits in SAM and Knative, each function's
# secrets and IAM, the Dockerfile against Package.swift, and each function's environment size (under Lambda's 4 KB).
"$python" Tests/Contract/check_descriptors.py
# docs/behaviour.md#configuration against the variables the code reads, both ways (and the defaults it states).
"$python" Tests/Contract/check_configuration.py
# docs/behaviour.md#data-contract's tables against infra/migrations/data-contract.json (generated; never by hand).
python3 scripts/data-contract-doc.py --check
# Knative: the Service against Knative Serving's field allow-list, each stage rendered by infra/knative/render.py, and
# deploy.md's kubectl steps (the migration Job applied again, waited for long enough).
"$python" Tests/Contract/check_knative.py
"$python" -c 'import sys; from cfnlint.runner import main; sys.argv = ["cfn-lint", "infra/aws/template.yaml", "infra/aws/edge-waf.yaml"]; sys.exit(main())'
echo "cfn-lint: infra/aws/template.yaml, infra/aws/edge-waf.yaml OK"
# The policy scanner teams run on infrastructure code: every check passes or is skipped in its descriptor with the
# reason (`checkov:skip=` comments, Metadata.checkov.skip in the template, checkov.io/skip annotations). A new failure
# fails here. Offline: no platform key, no guideline download.
scripts/checkov.sh

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
