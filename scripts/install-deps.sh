#!/usr/bin/env bash
# Installs what building and testing need, when it is missing: the C libraries' -dev packages and a
# PostgreSQL server for the throwaway test/dev clusters. Safe to run again; installs nothing when all is there.
set -euo pipefail

missing=()
pkg-config --exists libpq 2>/dev/null || missing+=(libpq-dev)
pkg-config --exists libcurl 2>/dev/null || missing+=(libcurl4-openssl-dev)
pkg-config --exists openssl 2>/dev/null || missing+=(libssl-dev)
ls -d /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
command -v curl >/dev/null 2>&1 || missing+=(curl)  # the runner tests' shell-script workers use it
# The FCM emulator's TLS mode makes its throwaway CA with the openssl command (libssl-dev does not bring it).
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
# Its system-store probe (and any real HTTPS peer) needs Debian's bundle at /etc/ssl/certs/ca-certificates.crt.
[ -r /etc/ssl/certs/ca-certificates.crt ] || missing+=(ca-certificates)
# Transaction pooling: the pooled test pass, the pooler tests and benchmarks, `runner dev --pooler`.
[ -x /usr/sbin/pgbouncer ] || missing+=(pgbouncer)
# The contract checks' tools (make test) and the bench's fan-out peer (make bench) live in venvs under .build/;
# Debian's python3 lacks ensurepip without python3-venv.
command -v python3 >/dev/null 2>&1 || missing+=(python3)
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || missing+=(python3-venv)
# `make release` bundles libpq, libcurl and OpenSSL into each Lambda zip and points the binary's run path at them;
# the zip check (make test) reads every ELF file's version needs and runs `bootstrap` in a debootstrap minbase root.
command -v patchelf >/dev/null 2>&1 || missing+=(patchelf)
command -v readelf >/dev/null 2>&1 || missing+=(binutils)
[ -x /usr/sbin/debootstrap ] || missing+=(debootstrap)
# The container image (make image, make test's image check): buildah builds and mounts it without a daemon;
# unshare and chroot (util-linux, coreutils) run its entrypoint from its root file system.
command -v buildah >/dev/null 2>&1 || missing+=(buildah)
# The fan-out tests (make test) put a real TLS + HTTP/2 front (nghttpx, the nghttp2 project's proxy) before the FCM
# emulator, so libcurl's multiplexing is checked against a server that is not ours.
[ -x /usr/sbin/nghttpx ] || missing+=(nghttp2-proxy)  # in /usr/sbin: not on a normal user's PATH
# The Lambda builds link libstdc++ statically (scripts/release.sh).
[ -f "$(clang -print-file-name=libstdc++.a 2>/dev/null)" ] || missing+=(libstdc++-12-dev)

# Tests at a fixed instant (docs/development.md#fixed-instant): libfaketime, preloaded into the built functions.
ls /usr/lib/*/faketime/libfaketime.so.1 >/dev/null 2>&1 || missing+=(libfaketime)

# The dev console's browser test (DevConsoleTests): headless Chromium, and a Japanese font for its screenshot.
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
[ -f /usr/share/fonts/opentype/ipafont-gothic/ipag.ttf ] || missing+=(fonts-ipafont-gothic)

# `make bench` only: the start-up section's profile (scripts/bench-startup-profile.sh) counts system calls with
# strace and instructions with valgrind's callgrind.
if [ "${1:-}" = "--bench-peer" ]; then
    command -v strace >/dev/null 2>&1 || missing+=(strace)
    command -v valgrind >/dev/null 2>&1 || missing+=(valgrind)
fi

# `make soak` only: wrk drives the runner.
if [ "${1:-}" = "--soak" ]; then
    command -v wrk >/dev/null 2>&1 || missing+=(wrk)
fi

if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
echo "install-deps: installing ${missing[*]}" >&2
if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: not root; run: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq -o DPkg::Lock::Timeout=300
# Another checkout's `make test` may be installing at the same moment: wait for dpkg's lock instead of failing.
apt-get install -y -qq -o DPkg::Lock::Timeout=300 "${missing[@]}" >/dev/null
