#!/usr/bin/env bash
# `make minroot`: a minimal Debian root file system (debootstrap's minbase of bookworm: no libpq, no libcurl, no
# OpenSSL library) under .build/minroot, where scripts/zip-check.sh runs an unzipped `bootstrap` to prove the zip
# carries every shared library it needs beyond glibc. Built once (a few minutes), then reused: the root is only
# complete when its marker file exists. Needs root (debootstrap) and deb.debian.org.
set -euo pipefail
cd "$(dirname "$0")/.."

mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
root=${MINROOT_DIR:-$PWD/.build/minroot}
# Cached by its inputs (suite, variant, mirror, this script) outside the checkout, so that `make clean`, another
# clone or worktree reuse it: .build/minroot links to /var/cache/caregiver-push/minroot-<key> (made when missing).
if [ -z "${MINROOT_DIR:-}" ] && [ ! -e "$root" ] && [ ! -L "$root" ] && [ "$(id -u)" -eq 0 ]; then
    key=$( (printf '%s\n' bookworm minbase "$mirror"; cat scripts/minroot.sh) | sha256sum | cut -c1-16)
    mkdir -p /var/cache/caregiver-push "$(dirname "$root")"
    ln -s "/var/cache/caregiver-push/minroot-$key" "$root"
fi
if [ -L "$root" ]; then
    target=$(readlink "$root")
    mkdir -p "$(dirname "$target")"
    # One build at a time: other checkouts wait for it and then reuse it.
    exec 9>"$target.lock"
    flock 9
    root=$target
fi
marker="$root/.caregiver-push-minroot"
if [ -f "$marker" ]; then
    echo "minroot: $root (cached)"
    exit 0
fi
scripts/install-deps.sh
rm -rf "$root"
mkdir -p "$(dirname "$root")"
echo "minroot: debootstrap --variant=minbase bookworm into $root (takes a few minutes)" >&2
debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.log" 2>&1 \
    || { tail -n 20 "$root.log" >&2; exit 1; }
# What the check relies on: the root has no copy of the libraries the zip must bring.
for library in libpq.so.5 libcurl.so.4 libssl.so.3 libcrypto.so.3; do
    if [ -n "$(find "$root/usr/lib" "$root/lib" -name "$library*" 2>/dev/null)" ]; then
        echo "minroot: $root already holds $library; it cannot show that the zip brings its own" >&2
        exit 1
    fi
done
date -u +%FT%TZ >"$marker"
echo "minroot: $root"
