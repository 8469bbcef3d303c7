#!/usr/bin/env bash
# A throwaway PgBouncer (Debian's `pgbouncer` package) in transaction-pooling mode in front of a local PostgreSQL,
# for the tests, the benchmarks and `runner dev --pooler`. Owned by the `postgres` user when we are root (PgBouncer
# refuses to run as root), like scripts/pg.sh's clusters.
#
#   scripts/pgbouncer.sh start DIR PORT UPSTREAM_PORT [POOL_SIZE] [MAX_CLIENT_CONN]
#       write DIR/pgbouncer.ini and start PgBouncer on 127.0.0.1:PORT for every database of the PostgreSQL on
#       127.0.0.1:UPSTREAM_PORT: pool_mode = transaction, default_pool_size = POOL_SIZE (default 10) server
#       connections per database and user, at most MAX_CLIENT_CONN (default 1000) client connections.
#       PGBOUNCER_QUERY_WAIT_TIMEOUT (seconds, default 30) bounds how long a client waits for a server connection.
#   scripts/pgbouncer.sh stop DIR     stop it (immediate shutdown) and wait until it is gone
#   scripts/pgbouncer.sh url PORT     print the DATABASE_URL through it
#
# Loopback only, `auth_type = trust` with an auth_file naming `postgres` and
# the runtime role `caregiver_push_runtime` (or the logins PGBOUNCER_USERS names): the same trust the throwaway
# clusters give.
set -euo pipefail

DB_NAME=caregiver_push
BINARY=/usr/sbin/pgbouncer

# without_inherited_fds (a daemon must not keep our caller's descriptors: runner dev waits on a pipe's EOF) and
# as_owner
. "$(dirname "$0")/daemon-lib.sh"

psql_bin() {
    if command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/psql" ]; then
        echo "$(pg_config --bindir)/psql"
    else
        echo "$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)/psql"
    fi
}

# The daemon's pid while it runs. It removes its pid file when it exits; a zombie (no init to reap it in some
# containers) counts as gone.
running_pid() {
    local dir=$1 pid
    [ -f "$dir/pgbouncer.pid" ] || return 1
    pid=$(cat "$dir/pgbouncer.pid" 2>/dev/null) || return 1
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
    [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != "Z" ] || return 1
    echo "$pid"
}

cmd=${1:?usage: pgbouncer.sh start DIR PORT UPSTREAM_PORT [POOL_SIZE] [MAX_CLIENT_CONN] | stop DIR | url PORT}
case "$cmd" in
start)
    dir=${2:?directory}
    port=${3:?port}
    upstream=${4:?upstream PostgreSQL port}
    pool=${5:-10}
    max_clients=${6:-1000}
    wait_timeout=${PGBOUNCER_QUERY_WAIT_TIMEOUT:-30}
    password=""
    auth_type=trust
    if [ -n "${PG_PASSWORD_FILE:-}" ] && [ -s "$PG_PASSWORD_FILE" ]; then
        password=$(cat "$PG_PASSWORD_FILE")
        auth_type=scram-sha-256
        export PGPASSWORD=$password
    fi
    [ -x "$BINARY" ] || { echo "pgbouncer.sh: $BINARY is missing: apt-get install pgbouncer (make test does)" >&2; exit 1; }
    dir=$(owner_reachable_dir "$dir")
    if running_pid "$dir" >/dev/null; then exit 0; fi
    # Every database of the upstream server (`*`), so that a database created later (a test's own) is pooled too.
    cat >"$dir/pgbouncer.ini" <<EOF
;; Written by scripts/pgbouncer.sh; see docs/deploy.md, "Connection pooling".
[databases]
* = host=127.0.0.1 port=$upstream

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = $auth_type
auth_file = $dir/userlist.txt
admin_users = postgres
pool_mode = transaction
default_pool_size = $pool
min_pool_size = 0
reserve_pool_size = 0
max_client_conn = $max_clients
max_db_connections = 0
query_wait_timeout = $wait_timeout
server_login_retry = 1
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
log_connections = 0
log_disconnections = 0
EOF
    # With the cluster's password (PG_PASSWORD_FILE, make dev's) clients must give it too, and PgBouncer logs in to
    # the server with it; otherwise both trust local connections (the test runs' throwaway clusters). The functions
    # connect as the runtime role (docs/deploy.md#roles), with the password in PG_RUNTIME_PASSWORD_FILE (make dev's
    # own for it) or else the cluster's; tests, migrations and seeding as postgres.
    # PGBOUNCER_USERS: the logins it knows (a pooler that does not know the runtime role: DeploymentCheckTests).
    # PG_RUNTIME_PASSWORD_FILE: the runtime role's own password (make dev's), never the superuser's.
    users=${PGBOUNCER_USERS:-postgres caregiver_push_runtime}
    runtime_password=$password
    if [ -n "${PG_RUNTIME_PASSWORD_FILE:-}" ] && [ -s "$PG_RUNTIME_PASSWORD_FILE" ]; then
        runtime_password=$(cat "$PG_RUNTIME_PASSWORD_FILE")
    fi
    (umask 077 && for user in $users; do
        if [ "$user" = caregiver_push_runtime ]; then printf '"%s" "%s"\n' "$user" "$runtime_password"
        else printf '"%s" "%s"\n' "$user" "$password"; fi
    done >"$dir/userlist.txt")
    if [ "$(id -u)" -eq 0 ]; then chown -R postgres:postgres "$dir"; fi
    # Each client is a descriptor: raise the soft limit to the hard one (a login shell's 1024 would cap the pooler
    # near max_client_conn 1000).
    without_inherited_fds as_owner bash -c 'ulimit -Sn "$(ulimit -Hn)" 2>/dev/null; exec "$0" "$@"' \
        "$BINARY" -d -q "$dir/pgbouncer.ini"
    # Ready once its admin console answers.
    psql=$(psql_bin)
    for _ in $(seq 1 100); do
        if "$psql" -h 127.0.0.1 -p "$port" -U postgres -d pgbouncer -qtA -c 'SHOW VERSION' >/dev/null 2>&1; then
            exit 0
        fi
        sleep 0.05
    done
    echo "pgbouncer.sh: PgBouncer did not come up on 127.0.0.1:$port; its log:" >&2
    tail -n 20 "$dir/pgbouncer.log" >&2 || true
    exit 1
    ;;
stop)
    dir=${2:?directory}
    [ -d "$dir" ] || exit 0
    dir=$(cd "$dir" && pwd -P)
    pid=$(running_pid "$dir") || exit 0
    # The admin console's SHUTDOWN first: a daemon started from a thread that blocks signals (a test runner's
    # worker) inherits that mask and never sees SIGTERM. Then SIGTERM (PgBouncer 1.18: immediate shutdown), then
    # SIGKILL.
    port=$(awk -F' *= *' '$1 == "listen_port" {print $2}' "$dir/pgbouncer.ini")
    if [ -n "${PG_PASSWORD_FILE:-}" ] && [ -s "$PG_PASSWORD_FILE" ]; then export PGPASSWORD; PGPASSWORD=$(cat "$PG_PASSWORD_FILE"); fi
    "$(psql_bin)" -h 127.0.0.1 -p "$port" -U postgres -d pgbouncer -qtA -c SHUTDOWN >/dev/null 2>&1 || true
    for signal in TERM KILL; do
        for _ in $(seq 1 80); do
            running_pid "$dir" >/dev/null || exit 0
            sleep 0.025
        done
        kill "-$signal" "$pid" 2>/dev/null || true
    done
    ;;
url)
    if [ -n "${PG_PASSWORD_FILE:-}" ] && [ -s "$PG_PASSWORD_FILE" ]; then
        echo "postgresql://postgres:$(cat "$PG_PASSWORD_FILE")@127.0.0.1:${2:?port}/$DB_NAME"
    else
        echo "postgresql://postgres@127.0.0.1:${2:?port}/$DB_NAME"
    fi
    ;;
*)
    echo "usage: pgbouncer.sh start DIR PORT UPSTREAM_PORT [POOL_SIZE] [MAX_CLIENT_CONN] | stop DIR | url PORT" >&2
    exit 2
    ;;
esac
