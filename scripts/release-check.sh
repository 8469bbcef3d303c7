#!/usr/bin/env bash
# Part of `make test`: builds the release zips, unzips one, and runs its `bootstrap` as a warm worker of
# `runner serve` — the Lambda Runtime API end to end — checking that a request through it succeeds and that the
# binary carries the Swift runtime itself. Needs DATABASE_URL and a debug build (the runner).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/release.sh
bin=$(swift build --show-bin-path)
workdir=$(mktemp -d /tmp/caregiver-push-release.XXXXXX)
python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' dist/lambda/push-register.zip "$workdir"
chmod +x "$workdir/bootstrap"
if ldd "$workdir/bootstrap" | grep -q libswiftCore; then
    echo "release check: bootstrap links libswiftCore dynamically" >&2
    exit 1
fi
ln -s "$workdir/bootstrap" "$workdir/push-register"
cat >"$workdir/functions.json" <<'JSON'
{"functions": [{"name": "push-register", "method": "POST", "path": "/api/push/register", "timeoutSeconds": 15, "memoryMB": 128, "concurrency": 2}]}
JSON
export SUPABASE_JWT_SECRET="release-check-secret-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
source scripts/runner-lib.sh
start_runner "$workdir" "$bin/runner" --mode warm --warm-workers 1 --functions "$workdir/functions.json" \
    --bin-dir "$workdir"
token=$("$bin/runner" token)
answer=$(curl -s -w '\n%{http_code}' -X POST "http://127.0.0.1:$port/api/push/register" \
    -H "authorization: Bearer $token" -H 'content-type: application/json' \
    -d '{"token":"release-check-device","platform":"ios","environment":"DEV"}')
if [ "$(echo "$answer" | tail -n 1)" != "200" ] || [ "$(echo "$answer" | head -n 1)" != '{"ok":true}' ]; then
    echo "release check: the unzipped bootstrap did not answer 200 {\"ok\":true} through the Runtime API:" >&2
    echo "$answer" >&2
    cat "$workdir/serve.err" >&2
    exit 1
fi
grep -q '"msg":"runtime API loop starting"' "$workdir/serve.err" || { echo "release check: bootstrap did not use the Runtime API" >&2; exit 1; }
echo "release check: dist/lambda/push-register.zip → bootstrap answered through the Runtime API (warm runner)"
