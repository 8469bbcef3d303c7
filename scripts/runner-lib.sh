# Sourced by the contract and release checks: runs `runner serve` in the background for the rest of the script.
#
#   start_runner WORKDIR RUNNER [serve options...]
#
# starts it on a free port with its output in WORKDIR/serve.out and WORKDIR/serve.err, waits until it listens, sets
# `port`, and on exit stops it with SIGTERM (its drain) and removes WORKDIR.
start_runner() {
    local workdir=$1 runner=$2
    shift 2
    "$runner" serve --port 0 "$@" >"$workdir/serve.out" 2>"$workdir/serve.err" &
    runner_pid=$!
    runner_workdir=$workdir
    trap stop_runner EXIT
    for _ in $(seq 1 200); do
        grep -q listening "$workdir/serve.out" 2>/dev/null && break
        sleep 0.1
    done
    port=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["port"])' "$workdir/serve.out")
}

stop_runner() {
    kill -TERM "$runner_pid" 2>/dev/null || true
    wait "$runner_pid" 2>/dev/null || true
    # make test's leak scan reads what the runner and its functions logged.
    if [ -n "${LEAK_CAPTURE_DIR:-}" ]; then
        cp "$runner_workdir/serve.err" "$LEAK_CAPTURE_DIR/$(basename "$0" .sh)-runner.err" 2>/dev/null || true
    fi
    rm -rf "$runner_workdir"
}
