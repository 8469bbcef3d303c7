#!/usr/bin/env bash
# checkov on infra/ (part of scripts/contract.sh, so of `make test`): exits non-zero on any failed check, and prints
# its counts. Every check that does not apply is skipped in the descriptor itself with its reason; list them with
# `scripts/checkov.sh --skipped`. Uses the pinned venv scripts/contract.sh installs (.build/checkov-venv).
set -euo pipefail
cd "$(dirname "$0")/.."
checkov=.build/checkov-venv/bin/checkov
[ -x "$checkov" ] || { echo "checkov: $checkov is missing (scripts/contract.sh installs it)" >&2; exit 1; }
report=$(mktemp /tmp/caregiver-push-checkov.XXXXXX)
trap 'rm -f "$report"' EXIT
status=0
# BC_API_KEY unset: nothing is sent anywhere. No version check and no download of the platform's id mapping (the
# skips name checks by their CKV ids): each would wait out a network timeout, doubling the run. The JSON report is
# one object per framework.
quiet=(--quiet)
[ "${1:-}" = "--skipped" ] && quiet=()  # --quiet leaves out the passed and skipped checks
env -u BC_API_KEY CKV_SKIP_PACKAGE_UPDATE_CHECK=true BC_SKIP_MAPPING=TRUE "$checkov" --directory infra --output json "${quiet[@]}" --compact --skip-download >"$report" \
    2>/dev/null || status=$?
python3 - "$report" "${1:-}" <<'PY'
import json, sys
text = open(sys.argv[1]).read().strip()
reports = json.loads(text) if text else []
reports = reports if isinstance(reports, list) else [reports]
passed = failed = skipped = 0
for report in reports:
    if not isinstance(report, dict) or "results" not in report:
        continue
    results, summary = report["results"], report.get("summary", {})
    passed += summary.get("passed", 0)
    failed += summary.get("failed", 0)
    skipped += summary.get("skipped", 0)
    failed += summary.get("parsing_errors", 0)
    for check in results.get("failed_checks", []):
        print(f"checkov: {check['check_id']} {check['check_name']}: {check['file_path']}:"
              f"{check['file_line_range'][0]} {check['resource']}", file=sys.stderr)
    if sys.argv[2] == "--skipped":
        for check in results.get("skipped_checks", []):
            print(f"checkov: skipped {check['check_id']} on {check['resource']}: "
                  f"{check.get('check_result', {}).get('suppress_comment', '')}")
print(f"checkov: {passed} passed, {failed} failed, {skipped} skipped (with their reasons in the descriptors)")
sys.exit(1 if failed or not reports else 0)
PY
# checkov's own status: 1 when a check failed (already reported above), anything else is checkov failing to run.
[ "$status" -le 1 ] || { echo "checkov: exited $status" >&2; exit 1; }
