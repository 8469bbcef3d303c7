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

# From / : postgres may not be allowed into the caller's working directory (a checkout under /root).
as_owner() {
    if [ "$(id -u)" -eq 0 ]; then
        (cd / && exec runuser -u postgres -- "$@")
    else
        "$@"
    fi
}

# Whether the postgres user can enter DIR's parent (each directory on the way needs search permission).
reachable_by_postgres() {
    runuser -u postgres -- test -x "$1" 2>/dev/null
}

# The directory to give a daemon of ours for DIR (made when missing): DIR itself, or, as root when postgres cannot
# reach it, a directory it can (DIR then links to it).
owner_reachable_dir() {
    local dir=$1 parent target
    if [ -L "$dir" ]; then
        (cd "$dir" && pwd -P)
        return
    fi
    if [ "$(id -u)" -eq 0 ] && [ ! -f "$dir/PG_VERSION" ]; then
        parent=$(mkdir -p "$(dirname "$dir")" && cd "$(dirname "$dir")" && pwd -P)
        if ! reachable_by_postgres "$parent"; then
            # One directory per checkout (named by the checkout and a hash of its path) holds all its daemons' data.
            target=/var/lib/caregiver-push/$(basename "$(dirname "$parent")")-$(printf '%s' "$parent" | sha256sum | cut -c1-12)/$(basename "$dir")
            # A directory left empty by an earlier attempt that postgres could not enter is replaced.
            if [ -d "$dir" ]; then rmdir "$dir"; fi
            mkdir -p "$target"
            chmod 755 "$(dirname "$target")" /var/lib/caregiver-push
            ln -s "$target" "$dir"
            echo "$(basename "$0"): postgres cannot reach $parent; $(basename "$dir") lives in $target ($dir links to it)" >&2
        fi
    fi
    mkdir -p "$dir"
    (cd "$dir" && pwd -P)
}
