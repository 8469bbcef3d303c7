#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for tests and local development, owned by the `postgres` user when we are root
# (postgres refuses to run as root).
#
#   scripts/pg.sh start DIR PORT   initialise DIR if needed, start the server on 127.0.0.1:PORT, create the database
#   scripts/pg.sh stop DIR         stop it (fast shutdown)
#   scripts/pg.sh url PORT         print the DATABASE_URL for it
#   scripts/pg.sh where DIR        print where DIR's cluster really lives (see below)
#
# As root, the cluster belongs to `postgres`, which must be able to reach DIR. When it cannot (a checkout in a 0700
# home such as /root), the cluster lives in /var/lib/caregiver-push/<checkout name>-<hash of DIR's path>/ instead and
# DIR becomes a symbolic link to it; nothing loosens the permissions of the home.
#
# With PG_SSL_DIR (holding server.crt and server.key, readable by the cluster's owner) the server speaks TLS with
# that certificate and accepts TCP connections over TLS only (hostssl): the TLS database test's server.
#
# The tests' clusters trade durability for speed (fsync, synchronous_commit and full_page_writes off). With PG_DURABLE=1
# they stay at PostgreSQL's defaults, as a production server runs (the bench's load section); PG_PRELOAD_LIBRARIES
# (e.g. pg_stat_statements) is passed as shared_preload_libraries, with pg_stat_statements' planning times tracked.
#
# With PG_PASSWORD_FILE (make dev's cluster) a TCP connection must give the `postgres` role's password
# (scram-sha-256), kept in that file (0600, made when missing); `url` then prints it in the URL. Without it the
# cluster trusts every local connection as its superuser, which lets any local user run `COPY … PROGRAM` as the
# cluster's OS user: fine for a test run's throwaway cluster, not for one that stays up. Either way only the
# cluster's owner reaches its Unix socket (in the 0700 data directory), which pg.sh itself uses.
set -euo pipefail

DB_NAME=caregiver_push

bindir() {
    if command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/initdb" ]; then
        pg_config --bindir
    else
        ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1
    fi
}

# without_inherited_fds, as_owner, owner_reachable_dir
. "$(dirname "$0")/daemon-lib.sh"

cmd=${1:?usage: pg.sh start DIR PORT | stop DIR | url PORT | where DIR}
case "$cmd" in
start)
    dir=${2:?data directory}
    port=${3:?port}
    bin=$(bindir)
    dir=$(owner_reachable_dir "$dir")
    if [ "$(id -u)" -eq 0 ] && ! reachable_by_postgres "$(dirname "$dir")"; then
        echo "pg.sh: the postgres user cannot reach $dir (a directory on its way is closed to others)." >&2
        echo "pg.sh: remove it (or its link) and start again: the cluster is then kept under /var/lib/caregiver-push/." >&2
        exit 1
    fi
    [ "$(id -u)" -eq 0 ] && chown postgres:postgres "$dir"
    chmod 700 "$dir"
    if [ ! -f "$dir/PG_VERSION" ]; then
        as_owner "$bin/initdb" -D "$dir" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 >/dev/null
    fi
    tls_options=""
    password=""
    if [ -n "${PG_PASSWORD_FILE:-}" ]; then
        if [ ! -s "$PG_PASSWORD_FILE" ]; then
            (umask 077 && od -An -tx1 -N16 /dev/urandom | tr -d ' \n' >"$PG_PASSWORD_FILE")
        fi
        password=$(cat "$PG_PASSWORD_FILE")
        printf '%s\n' 'local all all trust' 'host all all 127.0.0.1/32 scram-sha-256' \
            'host all all ::1/128 scram-sha-256' >"$dir/pg_hba.conf"
    fi
    if [ -n "${PG_SSL_DIR:-}" ]; then
        printf '%s\n' 'local all all trust' 'hostssl all all 127.0.0.1/32 trust' 'hostssl all all ::1/128 trust' \
            >"$dir/pg_hba.conf"
        tls_options="-c ssl=on -c ssl_cert_file=$PG_SSL_DIR/server.crt -c ssl_key_file=$PG_SSL_DIR/server.key"
    fi
    durability="-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    [ "${PG_DURABLE:-0}" = 1 ] && durability=""
    preload=""
    if [ -n "${PG_PRELOAD_LIBRARIES:-}" ]; then
        preload="-c shared_preload_libraries=$PG_PRELOAD_LIBRARIES"
        case ",$PG_PRELOAD_LIBRARIES," in *,pg_stat_statements,*) preload="$preload -c pg_stat_statements.track_planning=on" ;; esac
    fi
    if ! as_owner "$bin/pg_ctl" -D "$dir" status >/dev/null 2>&1; then
        without_inherited_fds as_owner "$bin/pg_ctl" -D "$dir" -l "$dir/server.log" -w -t 60 \
            -o "-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories=$dir -c max_connections=${PG_MAX_CONNECTIONS:-200} $durability $preload $tls_options" \
            start >/dev/null
    elif [ -n "$password" ]; then
        # A cluster made before it had a password (trust): the new pg_hba.conf applies from now on.
        as_owner "$bin/pg_ctl" -D "$dir" reload >/dev/null
    fi
    if [ -n "$password" ]; then
        # Over the owner's Unix socket, on stdin: never on a command line another user could read.
        echo "ALTER ROLE postgres PASSWORD '$password'" |
            as_owner "$bin/psql" -h "$dir" -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 -qtA >/dev/null
        export PGPASSWORD=$password
    fi
    psql_cmd=("$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 -qtA)
    if [ "$("${psql_cmd[@]}" -c "SELECT 1 FROM pg_database WHERE datname = '$DB_NAME'")" != "1" ]; then
        "${psql_cmd[@]}" -c "CREATE DATABASE $DB_NAME" >/dev/null
    fi
    # The project's tables live in its own schema (docs/deploy.md#the-database); the functions name it in every
    # statement. For whoever works in this throwaway cluster as its superuser (the tests' seeding and assertions, a
    # developer's psql), unqualified names find them too.
    "${psql_cmd[@]}" -c "ALTER ROLE postgres SET search_path TO caregiver_push, public" >/dev/null
    ;;
stop)
    dir=${2:?data directory}
    [ -f "$dir/PG_VERSION" ] || exit 0
    dir=$(cd "$dir" && pwd -P)
    as_owner "$(bindir)/pg_ctl" -D "$dir" -m fast -w stop >/dev/null 2>&1 || true
    ;;
where)
    dir=${2:?data directory}
    if [ -e "$dir" ]; then (cd "$dir" && pwd -P); else echo "$dir"; fi
    ;;
url)
    if [ -n "${PG_PASSWORD_FILE:-}" ] && [ -s "$PG_PASSWORD_FILE" ]; then
        echo "postgresql://postgres:$(cat "$PG_PASSWORD_FILE")@127.0.0.1:${2:?port}/$DB_NAME"
    else
        echo "postgresql://postgres@127.0.0.1:${2:?port}/$DB_NAME"
    fi
    ;;
*)
    echo "usage: pg.sh start DIR PORT | stop DIR | url PORT | where DIR" >&2
    exit 2
    ;;
esac
