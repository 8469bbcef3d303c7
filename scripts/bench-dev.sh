#!/usr/bin/env bash
# make bench's edit-loop section: how long from saving a file to the first response that runs the new
# code, under `runner dev` (cold mode, its source watcher), for an endpoint file (Functions/PushRegister/main.swift:
# one function relinks) and a shared file (Shared/CaregiverPush/Service/Service.swift: the CaregiverPush
# module recompiles and every function relinks); then where that time goes. Writes BENCH_DEV_OUTPUT (default
# docs/benchmarks-dev.md; then the figures README.md and docs/development.md quote from it are rewritten:
# scripts/doc-figures.py --write).
#
# Each edit makes the function log a marker of its own when it starts; a request is sent every 50 ms with its own
# x-request-id, and the first whose function logged the new marker is the first response with the new code.
# `runner dev` runs in a directory of links to this checkout's sources (its .data/ is its own, so the developer's
# dev database is not touched); its watcher builds this checkout. The edited files are restored at the end and the
# functions rebuilt from them.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
edits=${BENCH_DEV_EDITS:-3}
output=${BENCH_DEV_OUTPUT:-docs/benchmarks-dev.md}
endpoint=Functions/PushRegister/main.swift
shared=Shared/CaregiverPush/Service/Service.swift

scripts/install-deps.sh
swift build
bin=$(swift build --show-bin-path)
work=$(mktemp -d /tmp/caregiver-push-bench-dev.XXXXXX)
chmod 755 "$work"  # as root, PostgreSQL runs as postgres, which must reach $work/.data
for name in scripts infra Tests Functions Shared Client Package.swift; do ln -s "$repo/$name" "$work/$name"; done
cp "$endpoint" "$work/endpoint.orig"
cp "$shared" "$work/shared.orig"
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
http_port=$(free_port)
pg_port=$(free_port)
runner_pid=""
cleanup() {
    if [ -n "$runner_pid" ]; then
        kill -INT "$runner_pid" 2>/dev/null || true
        wait "$runner_pid" 2>/dev/null || true
    fi
    scripts/pg.sh stop "$work/.data/postgres" || true
    cp "$work/endpoint.orig" "$endpoint"
    cp "$work/shared.orig" "$shared"
    echo "bench-dev: sources restored; rebuilding the functions from them" >&2
    swift build >/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

(cd "$work" && exec "$bin/runner" dev --port "$http_port" --database-port "$pg_port" --bin-dir "$bin" \
    --no-schedules >"$work/stdout" 2>"$work/stderr") &
runner_pid=$!
for _ in $(seq 1 600); do
    grep -q '^sed -e ' "$work/stdout" 2>/dev/null && break
    kill -0 "$runner_pid" 2>/dev/null || { cat "$work/stderr" >&2; exit 1; }
    sleep 0.1
done

now() { date +%s.%N; }

# Rewrites FILE from its original with MARKER logged when the function starts.
apply_edit() {  # kind marker
    case "$1" in
    endpoint)
        python3 - "$work/endpoint.orig" "$endpoint" "$2" <<'PY'
import sys
original, target, marker = sys.argv[1:]
text = open(original).read()
edit = 'import Glibc\n\n_ = "{\\"msg\\":\\"%s\\"}\\n".withCString { write(2, $0, strlen($0)) }\n' % marker
open(target, "w").write(edit + text)
PY
        ;;
    shared)
        python3 - "$work/shared.orig" "$shared" "$2" <<'PY'
import sys
original, target, marker = sys.argv[1:]
text = open(original).read()
anchor = "        let service = CaregiverService(function: type(of: endpoint).function, environment: environment)\n"
assert anchor in text, "the shared file's anchor moved: update scripts/bench-dev.sh"
text = text.replace(anchor, anchor + '        service.logger.info("%s")\n' % marker, 1)
open(target, "w").write(text)
PY
        ;;
    esac
}

# Prints the seconds from the edit to the first response of push-register that logged MARKER.
measure() {  # kind n
    local marker="bench-edit-$1-$2-$RANDOM" started k=0 answered
    apply_edit "$1" "$marker" || { echo "bench-dev: the $1 edit could not be made" >&2; exit 1; }
    started=$(now)
    while true; do
        k=$((k + 1))
        curl -s -o /dev/null -H "x-request-id: $marker-r$k" -H 'content-type: application/json' \
            -X POST "http://127.0.0.1:$http_port/api/push/register" -d '{}' || true
        answered=$(now)
        sleep 0.05
        if grep -F "\"requestId\":\"$marker-r$k\"" "$work/stderr" | grep -qF "\"msg\":\"$marker\""; then
            python3 -c "print(f'{$answered - $started:.2f}')"
            return
        fi
        if python3 -c "import sys; sys.exit(0 if $answered - $started > 900 else 1)"; then
            echo "bench-dev: no response with the new code 900 s after the edit" >&2
            exit 1
        fi
    done
}

median() { python3 -c 'import statistics, sys; print(f"{statistics.median(float(x) for x in sys.argv[1:]):.1f}")' "$@"; }

declare -A results
for kind in endpoint shared; do
    samples=()
    for n in $(seq 1 "$edits"); do
        samples+=("$(measure "$kind" "$n")")
        echo "bench-dev: $kind edit $n: ${samples[-1]} s to the first response with the new code" >&2
        # Let the watcher finish the other products of a shared edit before the next edit.
        sleep 1
        while [ "$(grep -c '"msg":"source changed: rebuilding"' "$work/stderr")" != \
            "$(grep -cE '"msg":"(functions rebuilt|rebuild failed)' "$work/stderr")" ]; do
            sleep 0.2
        done
    done
    results[$kind]="$(median "${samples[@]}") (${samples[*]})"
done

# Where a shared edit's time goes: the one module's incremental compile, then each function's link.
apply_edit shared "bench-edit-breakdown-$RANDOM"
t0=$(now); swift build --target CaregiverPush >/dev/null; t1=$(now)
swift build --product push-register >/dev/null; t2=$(now)
# The other functions runner dev serves (infra/functions.json's, deploy-time ones aside).
for product in $(python3 -c 'import json; print(" ".join(f["name"] for f in json.load(open("infra/functions.json"))["functions"] if "deploy" not in f and f["name"] != "push-register"))'); do
    swift build --product "$product" >/dev/null
done
t3=$(now)
# A build with nothing to do: SwiftPM's own planning cost, paid once per `swift build --product`.
swift build --product push-register >/dev/null; t4=$(now)
read -r module first rest noop < <(python3 -c "print(f'{$t1 - $t0:.1f} {$t2 - $t1:.1f} {$t3 - $t2:.1f} {$t4 - $t3:.1f}')")

{
    echo "# Edit loop (\`runner dev\`)"
    echo
    echo "Written by \`scripts/bench-dev.sh\` (\`make bench\`, or alone: \`scripts/bench-dev.sh\`) on $(date -u +%F)," \
        "$(nproc) cores, debug build, cold mode. Seconds from saving the file to the first response whose function" \
        "process ran the new code (median of $edits edits; the samples in brackets)."
    echo
    echo "| edit | what rebuilds | edit → first response with the new code (s) |"
    echo "|---|---|---|"
    echo "| endpoint file \`$endpoint\` | push-register only | ${results[endpoint]} |"
    echo "| shared file \`$shared\` | CaregiverPush, then every function (the invoked one first) | ${results[shared]} |"
    echo
    echo "Where a shared edit's time goes (one run, \`swift build\` by hand):"
    echo
    echo "| step | s |"
    echo "|---|---|"
    echo "| \`swift build --target CaregiverPush\` (the module's incremental compile) | $module |"
    echo "| \`swift build --product push-register\` (its link, and SwiftPM's planning) | $first |"
    echo "| the other five functions, one \`swift build --product\` each | $rest |"
    echo "| \`swift build --product push-register\` with nothing to do (planning alone) | $noop |"
} >"$output"
cat "$output"
# The figures README.md and docs/development.md quote from it, rewritten from this run (make test checks them).
if [ "$output" = docs/benchmarks-dev.md ]; then
    python3 scripts/doc-figures.py --write
fi
