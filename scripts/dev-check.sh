#!/usr/bin/env bash
# The newcomer's check: a fresh clone of this checkout (its tracked files as they are now) in a home directory closed to others,
# `make dev` there, and every line the banner prints must work. Uses the runner and functions this checkout built
# (DEV_BIN_DIR), so that it checks paths, users and permissions rather than rebuilding everything.
#
#   scripts/dev-check.sh root   as root, a clone under /root (0700): the cluster must live where postgres can reach
#                               it, named in the banner, with /root's permissions untouched
#   scripts/dev-check.sh user   as root: a throwaway user (useradd) with a 0700 home, a clone there, make dev as that
#                               user (PostgreSQL runs as the user); the user and the clone are removed afterwards
#   scripts/dev-check.sh self   as whoever runs it (not root): a clone under $HOME
#
# Prints the time from `make dev` to the banner. Needs a debug build (swift build) and the packages (make dev's).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
mode=${1:?usage: dev-check.sh root | user | self}
bin=$(swift build --show-bin-path)
# What runner dev runs: the runner and the functions of infra/functions.json that are not deploy-time only.
served=($(python3 -c 'import json; print(" ".join(f["name"] for f in json.load(open("infra/functions.json"))["functions"] if "deploy" not in f))'))
for product in runner "${served[@]}"; do
    [ -x "$bin/$product" ] || { echo "dev-check: $bin/$product is missing: swift build first" >&2; exit 1; }
done
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
http_port=$(free_port)
pg_port=$(free_port)

as_user=()
case "$mode" in
root)
    [ "$(id -u)" -eq 0 ] || { echo "dev-check root: needs root" >&2; exit 1; }
    home=/root
    ;;
user)
    [ "$(id -u)" -eq 0 ] || { echo "dev-check user: needs root (useradd); as a normal user run: dev-check.sh self" >&2; exit 1; }
    user=cpdev$$
    useradd --create-home --shell /bin/bash "$user"
    home=$(getent passwd "$user" | cut -d: -f6)
    chmod 700 "$home"
    as_user=(runuser -u "$user" --)
    ;;
self)
    [ "$(id -u)" -ne 0 ] || { echo "dev-check self: run as a normal user (as root: dev-check.sh root or user)" >&2; exit 1; }
    home=$HOME
    ;;
*)
    echo "usage: dev-check.sh root | user | self" >&2
    exit 2
    ;;
esac
home_mode_before=$(stat -c %a "$home")
work=$(mktemp -d "${TMPDIR:-/tmp}/caregiver-push-dev-check.XXXXXX")
chmod 755 "$work"
clone=$home/caregiver-push-dev-check-$$
runner_pid=""
cleanup() {
    if [ -n "$runner_pid" ] && kill -0 "$runner_pid" 2>/dev/null; then
        kill -INT -- "-$runner_pid" 2>/dev/null || true
        for _ in $(seq 1 100); do kill -0 "$runner_pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL -- "-$runner_pid" 2>/dev/null || true
    fi
    if [ -d "$clone" ]; then
        "${as_user[@]}" make -s -C "$clone" db-stop >/dev/null 2>&1 || true
        for link in "$clone/.data/postgres" "$clone/.data/pgbouncer"; do
            if [ -L "$link" ]; then rm -rf "$(dirname "$(readlink -f "$link")")"; fi
        done
        rm -rf "$clone"
    fi
    rm -rf "$work"
    if [ "$mode" = user ]; then userdel --remove "$user" 2>/dev/null || true; fi
}
trap cleanup EXIT

# The build, where the user can run it: a copy of the executables (the checkout may be closed to that user).
mkdir -p "$work/bin"
for product in runner "${served[@]}"; do cp "$bin/$product" "$work/bin/"; done
chmod -R a+rX "$work/bin"
git -c safe.directory="$repo" clone -q --no-hardlinks "$repo" "$work/clone.git-src"
chmod -R a+rX "$work/clone.git-src"
if [ "$mode" = user ]; then chown -R "$user" "$work/clone.git-src"; fi
"${as_user[@]}" git clone -q "$work/clone.git-src" "$clone"
# The working tree's tracked files as they are: its uncommitted changes applied (new files not yet added are not).
git diff --binary HEAD >"$work/uncommitted.diff"
chmod a+r "$work/uncommitted.diff"
if [ -s "$work/uncommitted.diff" ]; then "${as_user[@]}" git -C "$clone" apply "$work/uncommitted.diff"; fi

log=$work/dev.log
: >"$log"
chmod 666 "$log"
started=$(date +%s.%N)
# A process group of its own, so that Ctrl-C (SIGINT) reaches runner dev as it would from a terminal.
setsid "${as_user[@]}" make -C "$clone" dev DEV_HTTP_PORT="$http_port" DEV_PG_PORT="$pg_port" \
    DEV_BIN_DIR="$work/bin" >"$log" 2>&1 </dev/null &
runner_pid=$!
ready=""
for _ in $(seq 1 1200); do
    if grep -q '^sed -e ' "$log"; then ready=$(date +%s.%N); break; fi
    if ! kill -0 "$runner_pid" 2>/dev/null; then break; fi
    sleep 0.1
done
if [ -z "$ready" ]; then
    echo "dev-check $mode: make dev did not come up; its output:" >&2
    cat "$log" >&2
    exit 1
fi
echo "dev-check $mode: make dev in $clone ready in $(python3 -c "print(f'{$ready - $started:.1f}')") s" >&2

failures=0
fail() { echo "dev-check $mode: $*" >&2; failures=$((failures + 1)); }
if [ "$mode" = root ]; then
    grep -q 'data in /var/lib/caregiver-push/' "$log" \
        || fail "the banner does not name the cluster's directory under /var/lib/caregiver-push"
fi
[ "$(stat -c %a "$home")" = "$home_mode_before" ] || fail "$home's mode changed from $home_mode_before"
if grep -q '^Usage:' "$log"; then fail "make dev printed a usage text"; fi

# Every printed command, run as the developer would paste it, in the clone.
count=0
while IFS= read -r line; do
    count=$((count + 1))
    output=$(cd "$clone" && "${as_user[@]}" bash -c "$line" 2>&1) || { fail "exit $? from: ${line:0:80}…"; continue; }
    case "$line" in
    curl*/_emulator/fcm/messages)
        [[ "$output" == *'"token":"demo-device-token-caregiver-phone"'* ]] \
            || fail "the emulator shows no message to the demo phone: $output"
        ;;
    curl*)
        echo "$output" | tail -n 1 | grep -Eq '^HTTP 20[0-9]$' || fail "${line:0:60}… answered: $output"
        ;;
    sed*)
        echo "$output" | grep -Eq '"statusCode" *: *20[01]' || fail "the stdin invocation answered: $output"
        ;;
    esac
done < <(grep -E '^(curl|sed -e) ' "$log")
[ "$count" -ge 7 ] || fail "the banner printed $count commands, not the 7 expected"
# The functions log in as the runtime role with a password of its own: the superuser's password does not log it in
# (a function's DATABASE_URL must never be a superuser's login in disguise), its own does.
pg_password=$(cat "$clone/.data/postgres.password")
runtime_password=$(cat "$clone/.data/runtime.password" 2>/dev/null || true)
runtime_login() {
    PGPASSWORD=$1 PGCONNECT_TIMEOUT=5 psql -X -q -At -h 127.0.0.1 -p "$pg_port" -U caregiver_push_runtime \
        -d caregiver_push -c 'SELECT 1' >/dev/null 2>&1
}
if runtime_login "$pg_password"; then fail "the runtime role logs in with the superuser's password"; fi
[ -n "$runtime_password" ] && runtime_login "$runtime_password" \
    || fail "the runtime role does not log in with its own password (.data/runtime.password)"
console=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$http_port/_dev")
[ "$console" = 200 ] || fail "the console at /_dev answered $console"
if [ "$failures" -ne 0 ]; then
    echo "dev-check $mode: $failures failures; make dev's output:" >&2
    cat "$log" >&2
    exit 1
fi
if [ -n "${DEV_CHECK_VERBOSE:-}" ]; then cat "$log" >&2; fi
echo "dev-check $mode: all $count printed commands worked, the console answered, $home kept its mode $home_mode_before"
