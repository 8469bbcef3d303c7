#!/usr/bin/env bash
# The lock-out on the gateway (docs/deploy.md, "Per-client limits"): one client floods a route with anonymous junk
# (wrk, CONNECTIONS each level), while another client posts to the same route 20 times a second; prints the flood's
# rate and how many of the other client's requests failed (anything but the function's 401). Needs DATABASE_URL
# (`scripts/with-db.sh PORT scripts/measure-lockout.sh`), the built runner and Debian's wrk.
#
#   RUNNER_ARGS   extra `runner serve` arguments (e.g. "--max-requests-per-client 512" for the share off)
#   LEVELS        the flood's connection counts (default "10 50 100 400")
set -uo pipefail
cd "$(dirname "$0")/.."
command -v wrk >/dev/null || scripts/install-deps.sh --soak
bin=$(swift build --show-bin-path)
work=$(mktemp -d /tmp/caregiver-push-lockout.XXXXXX)
"$bin/runner" migrate --migrations infra/migrations >/dev/null 2>&1
export SUPABASE_JWT_SECRET="lockout-measure-secret-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export PUSH_ENVIRONMENT=DEV LOG_LEVEL=error
# Both clients come from 127.0.0.1: as behind a proxy, each names itself in x-forwarded-for, which the runner is
# told to trust; the flood's connections may take the whole connection cap, as behind Knative.
# shellcheck disable=SC2086
"$bin/runner" serve --mode warm --port 0 --max-connections-per-client 512 --max-requests-per-client 16 \
    --client-address-header x-forwarded-for --trusted-proxy 127.0.0.1 \
    ${RUNNER_ARGS:-} >"$work/runner.log" 2>&1 &
runner=$!
trap 'kill $runner 2>/dev/null; wait $runner 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 1 600); do grep -q '"event":"listening"' "$work/runner.log" && break; sleep 0.1; done
port=$(grep -o '"event":"listening","port":[0-9]*' "$work/runner.log" | grep -o '[0-9]*$' | head -n 1)
for _ in $(seq 1 200); do [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz")" = 200 ] && break; sleep 0.1; done
cat >"$work/flood.lua" <<'LUA'
wrk.method = "POST"
wrk.body = "{}"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["X-Forwarded-For"] = "203.0.113.7"
LUA
cat >"$work/other.py" <<'PY'
import http.client, json, sys, time
port, seconds = int(sys.argv[1]), float(sys.argv[2])
statuses, latencies, end = {}, [], time.time() + seconds
while time.time() < end:
    started = time.time()
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        connection.request("POST", "/api/dose-records", body="{}",
                           headers={"Content-Type": "application/json", "X-Forwarded-For": "198.51.100.9"})
        answer = connection.getresponse(); answer.read(); connection.close()
        status = answer.status
    except Exception:
        status = "timeout"
    latencies.append(time.time() - started)
    statuses[str(status)] = statuses.get(str(status), 0) + 1
    time.sleep(max(0, 0.05 - (time.time() - started)))
latencies.sort()
failed = sum(n for s, n in statuses.items() if s != "401")
print(json.dumps({"failed": failed, "of": len(latencies), "statuses": statuses,
                  "p50_ms": round(latencies[len(latencies) // 2] * 1000, 1)}))
PY
echo "lockout: runner serve on :$port; without a flood: $(python3 "$work/other.py" "$port" 5)"
for connections in ${LEVELS:-10 50 100 400}; do
    python3 "$work/other.py" "$port" 10 >"$work/other.out" &
    other=$!
    wrk -t"$((connections < 2 ? 1 : 2))" -c"$connections" -d10s -s "$work/flood.lua" \
        "http://127.0.0.1:$port/api/dose-records" >"$work/wrk.out" 2>&1
    wait $other
    echo "lockout: flood of $connections connections, $(awk '/Requests\/sec/ {print $2}' "$work/wrk.out") req/s;" \
        "the other client: $(cat "$work/other.out")"
done
