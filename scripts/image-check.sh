#!/usr/bin/env bash
# Part of `make test` (and `.ci/run`'s image step): builds the container image (scripts/image.sh, on the local
# minroot base) and starts it as a platform would, then sends a caregiver's registration and a patient's dose
# through it and sees the push arrive at the FCM emulator.
#
#   - The image's root file system (`buildah mount`) is bind-mounted read-only, with /proc and a tmpfs /tmp, as
#     Knative's readOnlyRootFilesystem runs it; everything runs chrooted there as the image's user (10001, not root).
#   - The migrations run with the command of infra/knative/migrate-job.yaml, from the image.
#   - The server is the image's own ENTRYPOINT with its own ENV (read from the image's configuration), plus the
#     settings a deployment gives: DATABASE_URL, SUPABASE_JWT_SECRET, FCM_SERVICE_ACCOUNT_JSON, and FCM_API_BASE_URL
#     pointing at `runner fcm-emulator` on the host (the only stand-in: where Google would be).
#   - Every function of the table must answer from the image (a routed function's worker not starting would show),
#     and a body over the functions' 16 KiB is refused (413) by the entrypoint's gateway.
#
# Needs root (mount, chroot), DATABASE_URL (a throwaway database on 127.0.0.1) and the debug build (for the emulator
# and the token). Prints the image's size and the build time.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
    # make test as another user: said, not hidden; CI runs make test as root, where the image is always checked.
    echo "image check: SKIPPED as $(id -un) (buildah, mount and chroot need root): the container image was not" \
        "built or started, so its read-only root, user 10001 and a push through it were not checked. Run make test" \
        "as root for it (CI does)." >&2
    exit 0
fi
: "${DATABASE_URL:?image check: DATABASE_URL must name a throwaway database}"
export STORAGE_DRIVER=${STORAGE_DRIVER:-vfs}
host_bin=$(swift build --show-bin-path)
psql="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)/psql"

tag=${IMAGE_TAG:-localhost/caregiver-push:latest}
build_started=$(date +%s)
IMAGE_TAG=$tag scripts/image.sh >/dev/null
echo "image check: built $tag in $(($(date +%s) - build_started)) s;" \
    "size $(buildah images --format '{{.Size}}' "$tag" | head -n 1)" >&2

work=$(mktemp -d /tmp/caregiver-push-image-check.XXXXXX)
container=$(buildah from --pull=never "$tag")
root=$(buildah mount "$container")
pids=()
cleanup_image_check() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for _ in $(seq 1 50); do
        alive=0
        for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
        [ "$alive" = 0 ] && break
        sleep 0.1
    done
    # Whatever still runs chrooted in this container's root (a worker the runner did not reap): ours, and only ours.
    for proc in /proc/[0-9]*; do
        [ "$(readlink "$proc/root" 2>/dev/null)" = "$root" ] && kill -KILL "${proc#/proc/}" 2>/dev/null || true
    done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    buildah umount "$container" >/dev/null 2>&1 || true
    buildah rm "$container" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup_image_check EXIT

# The image's own configuration: entrypoint, environment, user, working directory.
buildah inspect --type image "$tag" | python3 -c '
import json, shlex, sys
config = json.load(sys.stdin)["OCIv1"]["config"]
with open(sys.argv[1], "w") as out:
    out.write("entrypoint=(%s)\n" % " ".join(shlex.quote(part) for part in config["Entrypoint"]))
    out.write("image_env=(%s)\n" % " ".join(shlex.quote(part) for part in config.get("Env", [])))
    out.write("image_user=%s\n" % shlex.quote(config.get("User", "")))
    out.write("image_workdir=%s\n" % shlex.quote(config.get("WorkingDir", "/")))
' "$work/config.sh"
source "$work/config.sh"
case "$image_user" in
    "" | 0 | 0:* | root | root:*) echo "image check: the image runs as root ($image_user)" >&2; exit 1 ;;
esac
echo "image check: entrypoint ${entrypoint[*]} as $image_user" >&2

# Runs argv inside the image's root as its user: root file system read-only, /proc and a tmpfs /tmp, environment
# only what is given (env -i). Every step execs the next, so the process id is the program's own: `( exec in_image
# … ) &` gives the id of the server itself, which the clean-up stops.
in_image() { (in_image_exec "$@"); }
in_image_exec() {
    exec unshare --mount --propagation private /bin/sh -c '
        root=$1; user=$2; workdir=$3; shift 3
        mount --bind "$root" "$root" && mount -o remount,bind,ro "$root" \
            && mount -t proc proc "$root/proc" && mount -t tmpfs -o size=64m,mode=1777 tmpfs "$root/tmp" \
            && exec chroot --userspec="$user" "$root" /bin/sh -c "cd \"\$0\" && exec \"\$@\"" "$workdir" "$@"
    ' in-image "$root" "$image_user" "$image_workdir" "$@"
}

# Proof that the root really is read-only for the functions' user.
if in_image env -i /bin/sh -c 'echo x > /app/written' 2>/dev/null; then
    echo "image check: the image's user could write to /app" >&2
    exit 1
fi

# The image ships the production gateway and nothing of the developer's tools.
if [ -e "$root/app/bin/runner" ] || [ ! -x "$root/app/bin/gateway" ]; then
    echo "image check: the image has a runner or lacks the gateway in /app/bin" >&2
    exit 1
fi

# A throwaway service account, and the FCM emulator (on the host) that knows its public half.
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
emulator_port=$(free_port)
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$work/key.pem" 2>/dev/null
python3 - "$work/key.pem" "$emulator_port" >"$work/service-account.json" <<'PY'
import json, sys
print(json.dumps({
    "type": "service_account", "project_id": "image-check", "private_key_id": "image-check-key",
    "private_key": open(sys.argv[1]).read(), "client_email": "image-check@image-check.iam.gserviceaccount.com",
    "client_id": "000000000000000000000", "token_uri": "http://127.0.0.1:%s/token" % sys.argv[2],
    "auth_uri": "https://accounts.google.com/o/oauth2/auth"}))
PY
"$host_bin/runner" fcm-emulator --service-account "$work/service-account.json" --port "$emulator_port" \
    >"$work/emulator.out" 2>"$work/emulator.err" &
pids+=($!)

jwt_secret="image-check-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
port=$(free_port)
# Two connection strings, as deployed (docs/deploy.md#roles): the migration Job connects as the schema's owner
# (DATABASE_URL here), the Service as the runtime role, which may only do what the functions' statements need.
runtime_url=$(echo "$DATABASE_URL" | sed -E 's#^([a-z]+://)[^@/]*@#\1caregiver_push_runtime@#')
deployment_env=(
    "PORT=$port"
    "DATABASE_URL=$runtime_url"
    "SUPABASE_JWT_SECRET=$jwt_secret"
    "PUSH_ENVIRONMENT=DEV"
    "FCM_SERVICE_ACCOUNT_JSON=$(base64 -w0 "$work/service-account.json")"
    "FCM_API_BASE_URL=http://127.0.0.1:$emulator_port"
)

# Migrations: infra/knative/migrate-job.yaml's command.
job_command=$(python3 -c '
import re, sys
text = open("infra/knative/migrate-job.yaml").read()
print(re.search(r"command: \[(.*)\]", text).group(1))')
eval "migrate=($(echo "$job_command" | tr -d ','))"
in_image env -i "${image_env[@]}" "DATABASE_URL=$DATABASE_URL" "${migrate[@]}" >"$work/migrate.out" 2>&1 \
    || { cat "$work/migrate.out" >&2; echo "image check: the migration Job's command failed" >&2; exit 1; }
# The runtime role may log in. A deployed Job does this itself from the runtime Secret's database-url, mounted as
# RUNTIME_DATABASE_URL_FILE (RuntimeLoginTests drives that against a cluster that asks for passwords); this throwaway
# cluster trusts loopback connections, so LOGIN alone.
"$psql" -q -v ON_ERROR_STOP=1 "$DATABASE_URL" -c 'ALTER ROLE caregiver_push_runtime LOGIN'

# The server: the image's entrypoint.
(in_image_exec env -i "${image_env[@]}" "${deployment_env[@]}" "${entrypoint[@]}") >"$work/serve.out" \
    2>"$work/serve.err" &
pids+=($!)
for _ in $(seq 1 200); do
    curl -s -o /dev/null "http://127.0.0.1:$port/" && grep -q '"listening"' "$work/emulator.out" && break
    sleep 0.1
done
curl -s -o /dev/null "http://127.0.0.1:$port/" \
    || { tail -n 20 "$work/serve.err" >&2; echo "image check: the image's server did not start" >&2; exit 1; }

# The probes Knative uses (infra/knative/service.yaml): liveness at once; readiness once every routed function has a
# live warm worker (the runner answers 503 naming the function until then).
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/healthz")" = 200 ] \
    || { echo "image check: GET /healthz did not answer 200" >&2; exit 1; }
ready=000
for _ in $(seq 1 100); do
    ready=$(curl -s -o "$work/readyz.out" -w '%{http_code}' "http://127.0.0.1:$port/readyz")
    [ "$ready" = 200 ] && break
    sleep 0.1
done
[ "$ready" = 200 ] || {
    grep -v '"not ready: no live worker"' "$work/serve.err" | tail -n 20 >&2
    cat "$work/readyz.out" >&2
    echo "image check: GET /readyz answered $ready" >&2
    exit 1
}
# The image's gateway links the Swift runtime in, and its tasks still run on NIO's event loops
# (docs/decisions.md#one-executor): it says so at start when they do not.
if grep -q 'NIO could not take it over' "$work/serve.err"; then
    echo "image check: the image's gateway runs its tasks on Swift's own executor, not NIO's event loops" >&2
    exit 1
fi
# The dev console is runner dev's alone: the image's server has none (docs/behaviour.md#dev-tools).
for path in /_dev /_dev/api/state /_dev/console.js; do
    code=$(curl -s -o /dev/null -w '%{http_code}' -H 'x-dev-console: 1' "http://127.0.0.1:$port$path")
    [ "$code" = 404 ] || { echo "image check: GET $path answered $code; the image must serve no dev console" >&2; exit 1; }
done

# A household: a patient with a morning medication, its session, and a caregiver linked to it.
caregiver=$(python3 -c 'import uuid; print(uuid.uuid4())')
patient=$(python3 -c 'import uuid; print(uuid.uuid4())')
medication=$(python3 -c 'import uuid; print(uuid.uuid4())')
patient_token="pst_$(head -c 32 /dev/urandom | base64 -w0 | tr '+/' '-_' | tr -d '=')"
digest=$(printf '%s' "$patient_token" | sha256sum | cut -d' ' -f1)
"$psql" -q -v ON_ERROR_STOP=1 "$DATABASE_URL" <<SQL
INSERT INTO caregiver_push.patients (id, display_name) VALUES ('$patient', 'イメージ確認');
INSERT INTO caregiver_push.caregiver_patient_links (caregiver_id, patient_id) VALUES ('$caregiver', '$patient');
INSERT INTO caregiver_push.medications (id, patient_id, name, start_date) VALUES ('$medication', '$patient', 'イメージ確認の薬', '2020-01-01');
INSERT INTO caregiver_push.medication_schedule_times (medication_id, time_of_day) VALUES ('$medication', '08:00'::time);
INSERT INTO caregiver_push.patient_sessions (patient_id, token_hash, expires_at)
    VALUES ('$patient', decode('$digest', 'hex'), now() + interval '1 hour');
SQL
caregiver_token=$(SUPABASE_JWT_SECRET=$jwt_secret "$host_bin/runner" token --caregiver "$caregiver")
device="image-check-device-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')"
today=$(TZ=Asia/Tokyo date +%F)

post() {  # path, bearer, body → "status body"
    curl -s -w '\n%{http_code}' -X POST "http://127.0.0.1:$port$1" -H "authorization: Bearer $2" \
        -H 'content-type: application/json' -d "$3"
}
answer=$(post /api/push/register "$caregiver_token" \
    "{\"token\":\"$device\",\"platform\":\"ios\",\"environment\":\"DEV\"}")
status=$(echo "$answer" | tail -n 1)
[ "$status" = 200 ] || [ "$status" = 201 ] \
    || { echo "$answer" >&2; tail -n 20 "$work/serve.err" >&2; echo "image check: register answered $status" >&2; exit 1; }
answer=$(post /api/dose-records "$patient_token" \
    "{\"medicationId\":\"$medication\",\"scheduledAt\":\"${today}T08:00:00+09:00\"}")
status=$(echo "$answer" | tail -n 1)
[ "$status" = 200 ] || [ "$status" = 201 ] \
    || { echo "$answer" >&2; tail -n 20 "$work/serve.err" >&2; echo "image check: dose answered $status" >&2; exit 1; }

# The push, as FCM received it.
pushed=0
for _ in $(seq 1 100); do
    if curl -s "http://127.0.0.1:$emulator_port/_emulator/fcm/messages" | python3 -c '
import json, sys
messages = json.load(sys.stdin)["messages"]
sys.exit(0 if any(sys.argv[1] in json.dumps(m) for m in messages) else 1)' "$device"; then
        pushed=1
        break
    fi
    sleep 0.1
done
[ "$pushed" = 1 ] || { tail -n 20 "$work/serve.err" >&2; echo "image check: no push reached the emulator" >&2; exit 1; }

# Every function of the image answers: each routed function's worker starts from the image (a bad token is
# refused by the function itself, 401 problem, not by the runner), push-sweep and db-migrate run one-shot.
for route in /api/push/unregister /api/dose-records/slot /api/prn-dose-records; do
    status=$(post "$route" not-a-token '{}' | tail -n 1)
    [ "$status" = 401 ] || { echo "image check: $route answered $status, not 401" >&2; exit 1; }
done
# The entrypoint's body limit is the functions' 16 KiB, not the runner's 1 MiB default: a larger body is a 413
# from the runner before any function sees it.
# (A function would refuse it too, after starting: the runner's refusal is told apart by no invocation of
# push-register being metered for it, its metrics line being written once per invocation.)
invocations() { grep -c '"_aws".*"push-register"\|"push-register".*"_aws"' "$work/serve.err" || true; }
sleep 0.5
before=$(invocations)
large="{\"token\":\"$(head -c 20000 /dev/zero | tr '\0' 'a')\"}"
status=$(post /api/push/register "$caregiver_token" "$large" | tail -n 1)
sleep 0.5
[ "$status" = 413 ] && [ "$(invocations)" = "$before" ] && [ "$before" -gt 0 ] \
    || { echo "image check: a 20 kB body answered $status after $before → $(invocations) invocations" >&2; exit 1; }
echo '{}' | in_image env -i "${image_env[@]}" "${deployment_env[@]}" /app/bin/push-sweep >"$work/sweep.out" 2>/dev/null \
    || { echo "image check: push-sweep did not run in the image" >&2; exit 1; }
echo '{"RequestType":"Delete"}' | in_image env -i "${image_env[@]}" /app/bin/db-migrate >"$work/migrate-fn.out" \
    2>/dev/null || true
grep -q . "$work/migrate-fn.out" || { echo "image check: db-migrate did not answer in the image" >&2; exit 1; }
mkdir -p "${LEAK_CAPTURE_DIR:-$work/leaks}"
cp "$work/serve.err" "${LEAK_CAPTURE_DIR:-$work/leaks}/image-serve.log"
echo "image check: registration and dose through $tag pushed $device (root read-only, user $image_user)" >&2
