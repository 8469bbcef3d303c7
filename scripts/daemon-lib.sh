# Sourced by scripts/pg.sh and scripts/pgbouncer.sh: how a throwaway daemon of ours is started.

# Runs "$@" with only stdin, stdout and stderr. The server pg_ctl leaves behind would otherwise keep whatever our
# caller let us inherit: Foundation's Process (runner dev) learns that its child exited when a socket every
# descendant inherits closes, so a postmaster holding it made `make dev` wait forever on its first start.
without_inherited_fds() (
    for fd in /proc/self/fd/*; do
        fd=${fd##*/}
        if [ "$fd" -gt 2 ]; then eval "exec $fd>&-"; fi
    done
    "$@"
)

as_owner() {
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}
