#!/usr/bin/env bash
# `make test`: installs what is missing, starts a throwaway PostgreSQL, builds every product, and runs the whole
# suite (in-process tests and the built executables driven through stdin/stdout) against that database; then runs
# the executable-level suites a second time through PgBouncer in transaction-pooling mode.
#
#   scripts/test.sh                 everything (lint, the docs' quoted figures, contract and descriptor checks, the
#                                   release and image checks, both passes, the client consumer, the leak scan)
#   scripts/test.sh ARGS…           `swift test ARGS…` only (e.g. --filter PoolerTests, --filter '^DatabaseTests\.')
#   scripts/test.sh --unit [ARGS]   the unit kind (make test-unit): the docs' quoted figures, the domain's floor
#                                   plan, then the platform's tests (Shared/Platform) and the unit package's
#                                   (Tests/Unit): no database, no process, no server framework built
#   scripts/test.sh --pooled [ARGS] the pooled pass only (ARGS default: --filter with its suites)
#   scripts/test.sh --kit [ARGS]    the app kit's package only (Client/: `swift test ARGS…` there), then the consumer
#                                   by path and by URL
set -euo pipefail
cd "$(dirname "$0")/.."

# Run again with DATABASE_URL pointing at PgBouncer: register, unregister, the three recording functions with
# their push, the sweep — every suite that drives the built functions.
POOLED_SUITES='ExecutableTests|PushRegistrationTests|RecordingPushTests|DurablePushTests|PushSweepTests'
# Server connections per database: well below the clients those suites run at once (20 parallel slot requests,
# parallel tests, kill tests' lock holders and probes), so clients queue for a server connection as in production.
POOLED_POOL_SIZE=4

# Each step's wall time, listed at the end of a whole run: where make test's time goes (docs/development.md#tests).
PHASES_FILE=${PHASES_FILE:-$(mktemp /tmp/caregiver-push-test-phases.XXXXXX)}
export PHASES_FILE
phase() {
    local name=$1 start=$SECONDS
    shift
    "$@"
    echo "$name $((SECONDS - start))" >>"$PHASES_FILE"
    echo "test: $name took $((SECONDS - start)) s" >&2
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The second pass: the same tests, unmodified, with DATABASE_URL at a PgBouncer (transaction mode, a small pool)
# in front of the same throwaway cluster (TEST_DIRECT_DATABASE_URL keeps the server's own address). Their output
# goes to the same LEAK_CAPTURE_DIR, and their isolated databases live on the same cluster, for the leak scan.
run_pooled_pass() (
    local direct=$DATABASE_URL upstream dir port stats
    upstream=$(echo "$direct" | sed -E 's#^[a-z]+://[^/]*:([0-9]+)/.*#\1#')
    dir=$(mktemp -d /tmp/caregiver-push-pgbouncer.XXXXXX)
    chmod 755 "$dir"
    trap 'scripts/pgbouncer.sh stop "$dir/bouncer"; rm -rf "$dir"' EXIT
    port=$(free_port)
    scripts/pgbouncer.sh start "$dir/bouncer" "$port" "$upstream" "$POOLED_POOL_SIZE"
    echo "test: the pooled pass — DATABASE_URL through PgBouncer on :$port (pool_mode = transaction," \
        "default_pool_size = $POOLED_POOL_SIZE)" >&2
    if [ "$#" -eq 0 ]; then set -- --filter "$POOLED_SUITES"; fi
    DATABASE_URL=$(scripts/pgbouncer.sh url "$port") TEST_DIRECT_DATABASE_URL=$direct \
        swift test --skip-build "$@"
    # Proof that the pass ran through the pooler and that its pools were smaller than their clients: PgBouncer's
    # own counters (SHOW STATS: transactions, and microseconds clients spent waiting for a server connection).
    stats=$("$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)/psql" -h 127.0.0.1 -p "$port" -U postgres \
        -d pgbouncer -qA -P footer=off -F ' ' -c 'SHOW STATS' | awk '
            NR == 1 { for (i = 1; i <= NF; i++) column[$i] = i; next }
            $1 != "pgbouncer" { x += $column["total_xact_count"]; w += $column["total_wait_time"] }
            END { print x + 0, w + 0 }')
    read -r transactions waited <<<"$stats"
    echo "test: the pooled pass ran $transactions transactions through PgBouncer; clients waited" \
        "$((waited / 1000)) ms in all for one of the pools' server connections" >&2
    if [ "${transactions:-0}" -eq 0 ] || [ "${waited:-0}" -eq 0 ]; then
        echo "test: the pooled pass did not queue behind its pools (transactions $transactions, wait $waited µs)" >&2
        exit 1
    fi
)

# The app kit (Client/, a package of its own with no server dependency): its server-free tests
# (CaregiverPushClientTests) and its end-to-end tests (CaregiverPushClientEndToEndTests) against the runner,
# functions and FCM emulator built above (FUNCTIONS_BIN_DIR) and this run's PostgreSQL (DATABASE_URL) — they fail
# without both. The kit's manifest sets no warning flag (an app's build decides); its CI holds it to none here.
# Then the consumer checks: an app-like package that resolves only the kit, by path and as a remote package.
run_kit_tests() {
    local kit=(--package-path Client --scratch-path .build/client-kit -Xswiftc -warnings-as-errors)
    if [ "$#" -gt 0 ]; then
        swift test "${kit[@]}" "$@"
    else
        # One target at a time: the end-to-end tests block threads while their child processes run, and the
        # server-free tests' timings (budgets, a deadline) must not wait on them for one of the two cores.
        swift test "${kit[@]}" --filter '^CaregiverPushClientTests\.'
        swift test "${kit[@]}" --filter '^CaregiverPushClientEndToEndTests\.'
    fi
    # By path (a monorepo or a submodule): the kit compiles as the app's own code, here under an app that treats
    # every warning as an error.
    swift test --package-path Tests/ClientConsumer --scratch-path .build/client-consumer -Xswiftc -warnings-as-errors
    run_kit_remote_check
}

# By URL, as the app resolves the kit once `Client/` is a repository of its own: a throwaway git repository made
# from the working tree (uncommitted edits included), resolved with a file:// URL and built with
# `-suppress-warnings`, as Xcode builds a remote package. SwiftPM drops a remote package's own warning settings,
# Xcode does not; so the repository is also built as a package of its own with `-suppress-warnings`, which fails
# ("conflicting options") if its manifest ever asks for warnings as errors again.
run_kit_remote_check() (
    repository=$(mktemp -d /tmp/caregiver-push-kit-remote.XXXXXX)
    # The pin of a throwaway URL is worth nothing afterwards, and the path build does not want it.
    trap 'rm -rf "$repository" Tests/ClientConsumer/Package.resolved' EXIT
    rm -f Tests/ClientConsumer/Package.resolved
    kit="$repository/caregiver-push-client"
    mkdir "$kit"
    tar -C Client --exclude=.build --exclude=.swiftpm -cf - . | tar -C "$kit" -xf -
    git -C "$kit" init -q -b main
    git -C "$kit" add -A
    git -C "$kit" -c user.name=kit -c user.email=kit@localhost commit -q -m "the kit's working tree"
    swift build --package-path "$kit" --scratch-path .build/client-kit-remote-root --target CaregiverPushClient \
        -Xswiftc -suppress-warnings
    rm -rf .build/client-consumer-remote
    CLIENT_KIT_URL="file://$kit" swift test --package-path Tests/ClientConsumer --disable-dependency-cache \
        --scratch-path .build/client-consumer-remote -Xswiftc -suppress-warnings
)

# The unit kind: two packages of their own, each with its own build folder — the platform's tests, and the domain's
# unit tests (Tests/Unit), which build only the domain and the platform. Then the proof: no module of Hummingbird or
# NIO was compiled for them (their build folders hold no object file of either).
run_unit_kind() {
    local package scratch
    for package in Shared/Platform Tests/Unit; do
        scratch=.build/unit-$(basename "$package" | tr '[:upper:]' '[:lower:]')
        swift build --build-tests --package-path "$package" --scratch-path "$scratch" \
            --explicit-target-dependency-import-check error
        swift test --skip-build --package-path "$package" --scratch-path "$scratch" "$@"
        if find "$scratch" -path '*/debug/Hummingbird*.build/*.o' -o -path '*/debug/NIO*.build/*.o' | grep -q .; then
            echo "test: the unit kind built Hummingbird or NIO ($scratch)" >&2
            exit 1
        fi
    done
}

run_tests() {
    # Lint first (whole runs): swift-format, from the toolchain, in strict mode over every Swift file (make lint).
    if [ "$#" -eq 0 ]; then
        phase lint swift format lint --strict --recursive Package.swift Functions Shared Gateway runner Tests Client
        # The figures README.md and docs/ quote from the files that record them (benchmarks, timings) still say
        # what those files say: a figure edited by hand, or a benchmark run that did not rewrite them, fails here.
        phase docs-figures python3 scripts/doc-figures.py --check
    fi
    # Every target may import only what it declares: the flag fails the build on an import from outside a target's
    # dependency closure (ManifestImportsTests checks the rest, both ways). On the build line, whose failure stops
    # the script: `swift test` would carry on after it. The test targets are built here too, so they are checked.
    phase build swift build --build-tests --explicit-target-dependency-import-check error
    # Whole runs: the domain's folders point one way, each shipped product links only what it may, and the unit
    # kind (the platform's tests and the domain's, packages of their own) passes.
    if [ "$#" -eq 0 ]; then
        phase floor-plan python3 scripts/floor-plan.py
        phase link-check python3 scripts/link-check.py --bin "$(swift build --show-bin-path)"
        phase unit run_unit_kind
    fi
    FUNCTIONS_BIN_DIR=$(swift build --show-bin-path)
    # Everything the functions and the runner say during the run is kept here for the leak scan at the end.
    LEAK_CAPTURE_DIR=$PWD/.build/leak-capture
    rm -rf "$LEAK_CAPTURE_DIR" && mkdir -p "$LEAK_CAPTURE_DIR"
    # The pooler tests must run here, not skip: the test command installs pgbouncer.
    TEST_REQUIRE_PGBOUNCER=1
    export FUNCTIONS_BIN_DIR LEAK_CAPTURE_DIR TEST_REQUIRE_PGBOUNCER
    if [ "${1:-}" = "--kit" ]; then
        shift
        run_kit_tests "$@"
        return
    fi
    if [ "${1:-}" = "--pooled" ]; then
        shift
        run_pooled_pass "$@"
        return
    fi
    # Whole runs only, as the usage above says (`scripts/test.sh ARGS…` is `swift test ARGS…`): the contract checks,
    # the newcomer's make dev, the release and image checks — a filtered run was paying a release build for them.
    if [ "$#" -eq 0 ]; then
        phase contract scripts/contract.sh "$FUNCTIONS_BIN_DIR"
    fi
    # Whole runs: a newcomer's `make dev` in a fresh clone in a closed home — as root under /root and as a
    # throwaway user under theirs; as another user, under their own home — and every line it prints.
    if [ "$#" -eq 0 ]; then
        if [ "$(id -u)" -eq 0 ]; then
            phase dev-check-root scripts/dev-check.sh root
            phase dev-check-user scripts/dev-check.sh user
        else
            phase dev-check-self scripts/dev-check.sh self
        fi
    fi
    if [ "$#" -eq 0 ]; then
        phase release-check scripts/release-check.sh
    fi
    # Whole runs: the container image from the zips just built (and the gateway's release build), started from its
    # own root file system, a registration and a dose through it to the FCM emulator (scripts/image-check.sh).
    if [ "$#" -eq 0 ]; then
        IMAGE_REUSE_ZIPS=1 phase image-check scripts/image-check.sh
    fi
    # The tests are built once: both passes (and the kit's end-to-end tests' runner) use this build.
    phase suites swift test --skip-build "$@"
    # Whole runs only: the app kit's own package and the app's view of it, then the executable suites again behind
    # PgBouncer.
    if [ "$#" -eq 0 ]; then
        phase kit run_kit_tests
        phase pooled-pass run_pooled_pass
    fi
    # Only a whole run (no filter) has captured enough to judge. First the scan must catch a planted token.
    if [ "$#" -eq 0 ]; then
        planted=$(mktemp -d /tmp/caregiver-push-leak-selftest.XXXXXX)
        echo '{"msg":"oops","auth":"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJwbGFudGVkIn0.c2lnbmF0dXJl"}' >"$planted/planted.log"
        if python3 scripts/leak-scan.py "$planted" >/dev/null 2>&1; then
            echo "leak-scan: self-test failed: a planted JWT went unnoticed" >&2
            exit 1
        fi
        rm -rf "$planted"
        phase leak-scan python3 scripts/leak-scan.py "$LEAK_CAPTURE_DIR"
        echo "test: where the time went (s):" $(awk '{printf "%s %s, ", $1, $2; t += $2} END {print "total", t}' "$PHASES_FILE") >&2
    fi
}

if [ "${1:-}" = "--unit" ]; then
    shift
    python3 scripts/doc-figures.py --check
    python3 scripts/floor-plan.py
    run_unit_kind "$@"
elif [ "${1:-}" = "--inside" ]; then
    shift
    run_tests "$@"
else
    : >"$PHASES_FILE"
    phase install-deps scripts/install-deps.sh
    exec scripts/with-db.sh "${TEST_PG_PORT:-25433}" scripts/test.sh --inside "$@"
fi
