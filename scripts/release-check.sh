#!/usr/bin/env bash
# Part of `make test`: builds the release zips (scripts/release.sh) and checks that each runs on provided.al2023 as
# shipped, with no layer:
#
#   1. scripts/zip-check.py: no ELF file in any zip needs a glibc symbol version above 2.34 (Amazon Linux 2023's),
#      every library any of them needs is glibc's or in the zip's lib/, and the run paths point there.
#   2. In a minimal root file system (scripts/minroot.sh: debootstrap minbase, no libpq, libcurl or OpenSSL), each
#      unzipped `bootstrap` starts and answers one event on stdin.
#   2b. libcurl, which bootstrap loads with dlopen when it first makes an HTTP client (not at exec), comes from the
#      zip's lib/ in that root: a bootstrap told to read its database secret from an extension that is not there
#      loads it and fails to connect, not to load libcurl; with lib/libcurl.so.4 taken away, it logs a failure that
#      names the library. The Runtime-API loop, which speaks HTTP over a socket of its own, never loads it.
#   3. push-register's `bootstrap`, inside that root, is a warm worker of `runner serve`: a request through the
#      Lambda Runtime API succeeds.
#   4. db-migrate's `bootstrap`, inside that root, answers a CloudFormation Create with SUCCESS and the newest
#      migration of infra/migrations (found in the zip's migrations/), over TLS to us-east-1's response bucket,
#      which a local stand-in plays.
#
# Steps 2-4 need root (chroot; skipped with a line saying so otherwise), DATABASE_URL (a migrated database on 127.0.0.1) and a debug build (the runner).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/release.sh
python3 scripts/zip-check.py dist/lambda/*.zip
root=${MINROOT_DIR:-$PWD/.build/minroot}
# Steps 2-4 need root (debootstrap, mount, chroot). As another user (make test with the packages installed) they
# are skipped, saying what was not checked; CI runs make test as root, where they always run.
if [ "$(id -u)" -ne 0 ]; then
    echo "release check: SKIPPED as $(id -un) (not root: no debootstrap, mount or chroot): not checked that each" \
        "zip's bootstrap runs in a minimal Debian root without libpq, libcurl or OpenSSL, loads its own libcurl," \
        "serves as a warm worker from that root, nor that db-migrate answers a Create from it. Checked: the zips" \
        "were built and their ELF files need nothing above glibc 2.34 (zip-check.py). Run make test as root for" \
        "the rest (CI does)." >&2
    exit 0
fi
scripts/minroot.sh
bin=$(swift build --show-bin-path)
inside=/var/task-check.$$  # the unzipped functions, as seen from inside the root
rm -rf "$root/var/task-check."*
mkdir -p "$root$inside"
workdir=$(mktemp -d /tmp/caregiver-push-release.XXXXXX)
cleanup_release_check() { rm -rf "$root$inside" "$workdir"; }
trap cleanup_release_check EXIT
# Runs a program of the root inside it, with /proc mounted as on Lambda (ld.so reads /proc/self/exe to expand
# $ORIGIN), in a mount namespace of its own so that the mount ends with the program. The environment is kept, and
# the process id: each step execs the next.
cat >"$workdir/in-root" <<SH
#!/bin/sh
PATH=/usr/sbin:/usr/bin:/sbin:/bin exec unshare --mount --propagation private /bin/sh -c \
    'mount -t proc proc "$root/proc" && exec chroot "$root" "\$@"' in-root "\$@"
SH
chmod +x "$workdir/in-root"
functions=()
for zip in dist/lambda/*.zip; do
    function=$(basename "$zip" .zip)
    functions+=("$function")
    python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$zip" "$root$inside/$function"
    chmod +x "$root$inside/$function/bootstrap"
    if [[ "$(ldd "$root$inside/$function/bootstrap")" == *libswiftCore* ]]; then
        echo "release check: $function's bootstrap links libswiftCore dynamically" >&2
        exit 1
    fi
done

# 2. Each bootstrap starts in the minimal root, with an empty environment, and answers `{}` (a problem or a summary).
for function in "${functions[@]}"; do
    if ! output=$(echo '{}' | env -i PATH=/usr/bin:/bin "$workdir/in-root" "$inside/$function/bootstrap" \
        2>"$workdir/$function.err"); then
        echo "release check: $function's bootstrap did not run in the minimal root:" >&2
        cat "$workdir/$function.err" >&2
        exit 1
    fi
    python3 -c 'import json, sys; json.loads(sys.argv[1])' "$output" \
        || { echo "release check: $function answered no JSON in the minimal root: $output" >&2; exit 1; }
done
echo "release check: ${functions[*]}: each bootstrap ran in the minimal root ($root)"

# 2b. libcurl is dlopen'ed when the process makes its first libcurl client; the root has none of its own, so the
# loader must find the zip's lib/libcurl.so.4 through bootstrap's run path ($ORIGIN/lib, which dlopen from the
# executable's own code searches). With DATABASE_SECRET_ARN set, bootstrap asks the Parameters and Secrets extension
# for it at start, over libcurl: nothing listens on port 1, so it must log "secret not read" (nothing listens) after
# loading libcurl — the loader's trace (LD_DEBUG=libs) names the file it initialised. Then the same without
# lib/libcurl.so.4: "secret not read" naming the library, not a crash. And in Runtime-API mode facing an unreachable
# Runtime API, bootstrap fails to connect without loading libcurl at all.
run_secret_read() {  # directory (inside the root) holding bootstrap, stderr file
    echo '{}' | env -i PATH=/usr/bin:/bin DATABASE_SECRET_ARN=arn:aws:secretsmanager:us-east-1:000000000000:secret:db \
        AWS_SESSION_TOKEN=release-check PARAMETERS_SECRETS_EXTENSION_HTTP_PORT=1 LD_DEBUG=libs \
        "$workdir/in-root" "$1/bootstrap" >/dev/null 2>"$2" || true
}
run_secret_read "$inside/push-register" "$workdir/curl-load.err"
if ! grep '"msg":"secret not read"' "$workdir/curl-load.err" | grep -q 'nothing listens' \
    || grep -q 'could not be loaded' "$workdir/curl-load.err" \
    || ! grep -q "calling init: $inside/push-register/lib/libcurl.so.4" "$workdir/curl-load.err"; then
    echo "release check: bootstrap in the minimal root did not load lib/libcurl.so.4 for its first HTTP client:" >&2
    grep -v '^ *[0-9]*:' "$workdir/curl-load.err" >&2 || true
    grep 'libcurl' "$workdir/curl-load.err" >&2 || true
    exit 1
fi
cp -r "$root$inside/push-register" "$root$inside/without-libcurl"
rm "$root$inside/without-libcurl/lib/libcurl.so.4"
run_secret_read "$inside/without-libcurl" "$workdir/no-curl.err"
if ! grep '"msg":"secret not read"' "$workdir/no-curl.err" | grep -q 'could not be loaded.*libcurl\.so\.4'; then
    echo "release check: without lib/libcurl.so.4, bootstrap did not report libcurl unavailable:" >&2
    grep -v '^ *[0-9]*:' "$workdir/no-curl.err" >&2 || true
    exit 1
fi
env -i PATH=/usr/bin:/bin AWS_LAMBDA_RUNTIME_API=127.0.0.1:1 LD_DEBUG=libs \
    "$workdir/in-root" "$inside/push-register/bootstrap" </dev/null >/dev/null 2>"$workdir/loop.err" || true
if ! grep '"msg":"runtime API unreachable"' "$workdir/loop.err" | grep -q 'connectionFailed' \
    || grep -q 'libcurl' "$workdir/loop.err"; then
    echo "release check: in Runtime-API mode, bootstrap did not fail to connect without loading libcurl:" >&2
    grep -v '^ *[0-9]*:' "$workdir/loop.err" >&2 || true
    grep 'libcurl' "$workdir/loop.err" >&2 || true
    exit 1
fi
echo "release check: bootstrap loads lib/libcurl.so.4 from the zip for its first HTTP client, names it when absent," \
    "and its Runtime-API loop never loads it"

# 3. push-register in the minimal root as runner serve's warm worker, over the Runtime API. The runner starts
# `push-register` from --bin-dir: a wrapper that enters the root.
mkdir -p "$workdir/bin"
printf '#!/bin/sh\nexec "%s" "%s/push-register/bootstrap"\n' "$workdir/in-root" "$inside" >"$workdir/bin/push-register"
chmod +x "$workdir/bin/push-register"
cat >"$workdir/functions.json" <<'JSON'
{"functions": [{"name": "push-register", "method": "POST", "path": "/api/push/register", "timeoutSeconds": 15, "memoryMB": 128, "concurrency": 2}]}
JSON
export SUPABASE_JWT_SECRET="release-check-secret-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
source scripts/runner-lib.sh
start_runner "$(mktemp -d /tmp/caregiver-push-release-runner.XXXXXX)" "$bin/runner" --mode warm --warm-workers 1 \
    --functions "$workdir/functions.json" --bin-dir "$workdir/bin"
trap 'stop_runner; cleanup_release_check' EXIT  # start_runner's trap, and ours
token=$("$bin/runner" token)
answer=$(curl -s -w '\n%{http_code}' -X POST "http://127.0.0.1:$port/api/push/register" \
    -H "authorization: Bearer $token" -H 'content-type: application/json' \
    -d '{"token":"release-check-device","platform":"ios","environment":"DEV"}')
if [ "$(echo "$answer" | tail -n 1)" != "200" ] || [ "$(echo "$answer" | head -n 1)" != '{"ok":true}' ]; then
    echo "release check: push-register's bootstrap in the minimal root did not answer 200 {\"ok\":true}:" >&2
    echo "$answer" >&2
    cat "$runner_workdir/serve.err" >&2
    exit 1
fi
grep -q '"msg":"runtime API loop starting"' "$runner_workdir/serve.err" \
    || { echo "release check: bootstrap did not use the Runtime API" >&2; exit 1; }
echo "release check: push-register's bootstrap answered through the Runtime API from the minimal root"

# 4. db-migrate in the minimal root: a Create, answered to us-east-1's response bucket as deployed there. A local
# stand-in plays the bucket through the configuration the function already honours: it is the HTTPS proxy libcurl
# follows (https_proxy), and answers at the tunnel's end under a certificate from a throwaway authority, the only one
# the function trusts (SSL_CERT_FILE, a copy inside the root).
bucket=cloudformation-custom-resource-response-useast1.s3.amazonaws.com
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$workdir/ca.key" \
    -out "$workdir/ca.pem" -days 1 -subj "/CN=release check throwaway CA" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$workdir/s3.key" \
    -out "$workdir/s3.csr" -subj "/CN=$bucket" 2>/dev/null
printf 'subjectAltName=DNS:%s\nextendedKeyUsage=serverAuth\n' "$bucket" >"$workdir/s3.ext"
openssl x509 -req -in "$workdir/s3.csr" -CA "$workdir/ca.pem" -CAkey "$workdir/ca.key" -CAcreateserial \
    -out "$workdir/s3.pem" -days 1 -extfile "$workdir/s3.ext" 2>/dev/null
cp "$workdir/ca.pem" "$root$inside/ca.pem"
python3 - "$workdir/s3" "$workdir/s3.pem" "$workdir/s3.key" <<'PY' &
import http.server, ssl, sys
tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
tls.load_cert_chain(sys.argv[2], sys.argv[3])
class Handler(http.server.BaseHTTPRequestHandler):
    def do_CONNECT(self):
        # The proxy's part: open the tunnel, then answer at its far end as the bucket.
        self.send_response(200, "Connection established")
        self.end_headers()
        self.close_connection = True
        connection = tls.wrap_socket(self.connection, server_side=True)
        try:
            Handler(connection, self.client_address, self.server)
        finally:
            connection.close()
    def do_PUT(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        status = 403 if self.headers.get("Content-Type") else 200  # signed without a Content-Type, as S3's are
        open(sys.argv[1] + ".body", "wb").write(body)
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
open(sys.argv[1] + ".port", "w").write(str(server.server_address[1]))
server.handle_request()
PY
s3_pid=$!
for _ in $(seq 1 100); do [ -s "$workdir/s3.port" ] && break; sleep 0.1; done
event=$(printf '{"RequestType":"Create","ResponseURL":"https://%s/response?Signature=x","StackId":"arn:aws:cloudformation:us-east-1:123456789012:stack/release-check/1","RequestId":"release-check","ResourceType":"Custom::DatabaseMigrations","LogicalResourceId":"DatabaseMigrations","ResourceProperties":{}}' "$bucket")
echo "$event" | env -i PATH=/usr/bin:/bin DATABASE_URL="$DATABASE_URL" LAMBDA_TASK_ROOT="$inside/db-migrate" \
    AWS_REGION=us-east-1 https_proxy="http://127.0.0.1:$(cat "$workdir/s3.port")" SSL_CERT_FILE="$inside/ca.pem" \
    "$workdir/in-root" "$inside/db-migrate/bootstrap" >"$workdir/db-migrate.out" 2>"$workdir/db-migrate.err" || true
wait "$s3_pid" || true
latest=$(ls infra/migrations/*.up.sql | sort | tail -n 1 | xargs basename | cut -c1-6)
if ! python3 - "$workdir/s3.body" "$latest" <<'PY'; then
import json, sys
body = json.load(open(sys.argv[1]))
assert body["Status"] == "SUCCESS" and body["Data"]["Latest"] == sys.argv[2], body
PY
    echo "release check: db-migrate's bootstrap in the minimal root did not answer SUCCESS with migration $latest:" >&2
    cat "$workdir/s3.body" "$workdir/db-migrate.out" "$workdir/db-migrate.err" >&2 2>/dev/null || true
    exit 1
fi
echo "release check: db-migrate's bootstrap answered SUCCESS (latest migration $latest) from the minimal root"
