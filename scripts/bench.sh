#!/usr/bin/env bash
# `make bench`: release build, a throwaway PostgreSQL (and PgBouncer in front of it), then the benchmarks, which
# write docs/benchmarks.md and the charts beside it (docs/benchmarks-*.svg); then the figures other documents quote
# from docs/benchmarks.md are rewritten from it (scripts/doc-figures.py --write).
#
# The functions measured are the ones `make release` ships: this runs scripts/release.sh (release builds with
# --static-swift-stdlib and its link flags, dist/lambda/<function>.zip), unzips each zip into
# .build/bench-lambda/<function>/ and gives the bench each `bootstrap` under its function's name. The C floors of the
# start-up section (Tests/Benchmarks/c) are built here with cc -O2 into .build/bench-c/.
#
#   BENCH_ONLY=pooler BENCH_OUTPUT=/tmp/pooler.md scripts/bench.sh    only the pooler section, elsewhere
#   BENCH_ONLY=startup BENCH_OUTPUT=/tmp/startup.md scripts/bench.sh  only the start-up section and the
#                                                                     device table, elsewhere
#   BENCH_ONLY=load BENCH_OUTPUT=bench-out/load.md scripts/bench.sh   only the load section (LoadBenchmark.swift),
#                                                                     elsewhere; BENCH_LOAD_RATES (20,50,100,200,300,
#                                                                     500,700 recordings/s), BENCH_LOAD_SECONDS (20 per rate),
#                                                                     BENCH_LOAD_RETRY_AFTER_RATE (the rate run again
#                                                                     with Retry-After: 1 on the stand-in's 503s, 100;
#                                                                     0: not run), BENCH_LOAD_PG_PORT (its own cluster),
#                                                                     BENCH_LOAD_NESTED=1 (the statements table counts
#                                                                     those inside the PL/pgSQL calls too: a diagnosis)
set -euo pipefail
cd "$(dirname "$0")/.."

configuration=${BENCH_CONFIGURATION:-release}
# The bench says in its report when it was not a release build (its in-process figures are then a debug build's).
export BENCH_CONFIGURATION=$configuration
# The fan-out peer: Google's Python Admin SDK, pinned to the version whose private FCM URL the peer script redirects.
firebase_admin_version=7.7.0
peer_venv=.build/bench-peer-venv

# Makes (or reuses) the peer's venv and exports BENCH_PEER_PYTHON, or BENCH_PEER_UNAVAILABLE with the reason, which
# the report prints: an offline machine gets a benchmark without the peer that says so, not a silent gap.
prepare_peer() {
    local python="$PWD/$peer_venv/bin/python" log
    if [ -x "$python" ] && "$python" -c "import sys, firebase_admin; sys.exit(firebase_admin.__version__ != '$firebase_admin_version')" 2>/dev/null; then
        export BENCH_PEER_PYTHON=$python
        return
    fi
    if ! command -v python3 >/dev/null 2>&1; then
        export BENCH_PEER_UNAVAILABLE="python3 is not installed, so the firebase-admin venv could not be made"
        return
    fi
    log=$(mktemp /tmp/caregiver-push-bench-peer.XXXXXX)
    echo "bench: installing firebase-admin==$firebase_admin_version into $peer_venv" >&2
    if { python3 -m venv --clear "$peer_venv" &&
        "$peer_venv/bin/pip" install --quiet --disable-pip-version-check --retries 2 --timeout 20 \
            "firebase-admin==$firebase_admin_version"; } >"$log" 2>&1; then
        export BENCH_PEER_PYTHON=$python
    else
        export BENCH_PEER_UNAVAILABLE="the firebase-admin==$firebase_admin_version venv could not be made ($(grep -v '^\s*$' "$log" | tail -n 1 | tr -d '|`'))"
        cat "$log" >&2
    fi
    rm -f "$log"
}

# The C floors, built as a normal C program is (cc -O2, dynamically linked against the system's libraries); the
# trivial one also statically, for the static process-start floor.
build_floors() {
    local source=Tests/Benchmarks/c out=.build/bench-c
    mkdir -p "$out"
    cc -O2 -Wall -Werror -o "$out/trivial" "$source/trivial.c"
    # The fair floors check the bearer token as push-register does (HMAC-SHA-256 over OpenSSL's low-level SHA-256);
    # register-evp the same through OpenSSL's HMAC() (the EVP path, for the HMAC lever); the *-unverified ones are
    # the earlier rounds' floors, which decode `sub` unchecked (kept one round to compare).
    local crypto=$(pkg-config --cflags --libs libcrypto)
    cc -O2 -Wall -Werror -o "$out/register" "$source/register.c" $(pkg-config --cflags --libs libpq) $crypto
    cc -O2 -Wall -Werror -DFLOOR_EVP_HMAC -o "$out/register-evp" "$source/register.c" \
        $(pkg-config --cflags --libs libpq) $crypto
    cc -O2 -Wall -Werror -DFLOOR_SKIP_VERIFY -o "$out/register-unverified" "$source/register.c" \
        $(pkg-config --cflags --libs libpq) $crypto
    cc -O2 -Wall -Werror -o "$out/runtime" "$source/runtime.c" $(pkg-config --cflags --libs libpq libcurl) $crypto
    cc -O2 -Wall -Werror -DFLOOR_SKIP_VERIFY -o "$out/runtime-unverified" "$source/runtime.c" \
        $(pkg-config --cflags --libs libpq libcurl) $crypto
    BENCH_C_DIRECTORY=$PWD/$out
    # The peak-RSS helper must be small (its own high-water mark is a floor on what it reports): static.
    cc -O2 -Wall -Werror -static -o "$out/peak-rss" "$source/peak-rss.c"
    if cc -static -O2 -o "$out/trivial-static" "$source/trivial.c" 2>/dev/null; then
        BENCH_TRIVIAL_BINARY=$PWD/$out/trivial-static
    fi
    # The Swift floors of the peak-RSS rows: a trivial static Swift program, and one with FoundationEssentials' JSON.
    swift build -c release --static-swift-stdlib -Xlinker -s --package-path Tests/Benchmarks/probes/rss \
        --scratch-path .build/bench-rss-probes
    BENCH_SWIFT_PROBES=$PWD/$(swift build -c release --package-path Tests/Benchmarks/probes/rss \
        --scratch-path .build/bench-rss-probes --show-bin-path | sed "s|^$PWD/||")
    export BENCH_C_DIRECTORY BENCH_TRIVIAL_BINARY BENCH_SWIFT_PROBES
}

# The shipped functions: scripts/release.sh's zips, unzipped as Lambda unzips them (bootstrap executable), and a
# folder where each bootstrap is found under its function's name (its $ORIGIN is still its own folder).
unpack_release() {
    local lambda=.build/bench-lambda zip function
    if [ "${BENCH_REUSE_ZIPS:-0}" != 1 ] || ! ls dist/lambda/*.zip >/dev/null 2>&1; then
        scripts/release.sh
    fi
    rm -rf "$lambda"
    mkdir -p "$lambda/bin"
    for zip in dist/lambda/*.zip; do
        function=$(basename "$zip" .zip)
        python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$zip" "$lambda/$function"
        chmod 755 "$lambda/$function/bootstrap"
        ln -s "../$function/bootstrap" "$lambda/bin/$function"
    done
    BENCH_LAMBDA_DIRECTORY=$PWD/$lambda
    BENCH_LAMBDA_ZIPS=$PWD/dist/lambda
    BENCH_FUNCTIONS_DIRECTORY=$PWD/$lambda/bin
    export BENCH_LAMBDA_DIRECTORY BENCH_LAMBDA_ZIPS BENCH_FUNCTIONS_DIRECTORY
}

# The cold-start levers, each alone (docs/benchmarks.md, "Cold-start levers"): push-register as shipped but with one
# lever changed, each in .build/bench-levers/<lever>/bootstrap beside the shipped lib/. After unpack_release.
#   unstripped         the release binary before release.sh strips it (what RELEASE_STRIP=0 ships), its DT_NEEDED
#                      reordered as shipped
#   linker-order       the shipped bootstrap with DT_NEEDED in the linker's order (libssl, libm, libgcc_s ahead of
#                      libc): what scripts/needed-order.sh saves
#   evp-digests        a release build of its own with -Xcc -DCOPENSSL_EVP_DIGESTS: SHA-256 and the token's HMAC
#                      through EVP (EVP_Digest, HMAC()), as before, instead of the low-level SHA-256 shipped
#   function-sections  a release build of its own with -Xfrontend -function-sections, stripped as shipped
#   lld                a release build of its own linked by lld instead of gold (swiftc's default on Linux)
#   relr               a release build of its own linked by lld with -z pack-relative-relocs (DT_RELR): measured
#                      here (Debian 12, glibc 2.36), not shippable (Amazon Linux 2023's glibc 2.34 lacks DT_RELR)
stage_levers() {
    local levers=$PWD/.build/bench-levers shipped=$PWD/.build/bench-lambda/push-register bin
    rm -rf "$levers"
    mkdir -p "$levers/unstripped"
    bin=$(swift build -c release --show-bin-path)
    cp "$bin/push-register" "$levers/unstripped/bootstrap"
    patchelf --set-rpath '$ORIGIN/lib' "$levers/unstripped/bootstrap"
    scripts/needed-order.sh "$levers/unstripped/bootstrap"
    ln -s "$shipped/lib" "$levers/unstripped/lib"
    mkdir -p "$levers/linker-order"
    objcopy --strip-all "$bin/push-register" "$levers/linker-order/bootstrap"
    patchelf --set-rpath '$ORIGIN/lib' "$levers/linker-order/bootstrap"
    ln -s "$shipped/lib" "$levers/linker-order/lib"
    # BENCH_LEVERS: which of the levers that need a build of their own to build (default: all).
    local lever
    for lever in ${BENCH_LEVERS:-function-sections lld relr evp-digests}; do
        case $lever in
        function-sections) lever_build function-sections "-Xfrontend -function-sections" ;;
        lld) lever_build lld "-use-ld=lld" ;;
        relr) lever_build relr "-use-ld=lld -Xlinker -z -Xlinker pack-relative-relocs" ;;
        evp-digests) lever_build evp-digests "-Xcc -DCOPENSSL_EVP_DIGESTS" ;;
        esac
    done
    export BENCH_LEVERS_DIRECTORY=$levers
    # The start-up profile names push-register's own functions from the unstripped build.
    export BENCH_PROFILE_SYMBOLS=$levers/unstripped/bootstrap
}

# lever_build NAME SWIFTC_FLAGS: push-register's zip built by release.sh with those flags in .build-lever-NAME,
# unzipped into .build/bench-levers/NAME.
lever_build() {
    local name=$1 flags=$2 variant=$PWD/.build/bench-levers/$1
    RELEASE_FUNCTIONS=push-register RELEASE_SCRATCH_PATH=.build-lever-$name RELEASE_DIST=.build-lever-$name/dist \
        RELEASE_SWIFTC_FLAGS="$flags" scripts/release.sh
    mkdir -p "$variant"
    python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' \
        ".build-lever-$name/dist/lambda/push-register.zip" "$variant"
    chmod 755 "$variant/bootstrap"
}

# The load section's own PostgreSQL: durable (the defaults, not the test clusters' fsync=off) with pg_stat_statements
# and PL/pgSQL preloaded, on BENCH_LOAD_PG_PORT, stopped on exit; its URL in BENCH_LOAD_DATABASE_URL. The host: the gateway's release
# build (BENCH_GATEWAY), in the bench's configuration of the build directory (the image links the Swift runtime
# statically, which the bench, through the Testing module of its fixtures, cannot: one configuration, not two that
# rebuild each other). The open-loop client (c/loadgen.c) and the peak-RSS helper, which reports push-sweep's CPU.
prepare_load() {
    local port=${BENCH_LOAD_PG_PORT:-25435} source=Tests/Benchmarks/c out=.build/bench-c
    load_pg_dir=$(mktemp -d /tmp/caregiver-push-bench-load-pg.XXXXXX)
    trap 'scripts/pg.sh stop "$load_pg_dir"; rm -rf "$load_pg_dir"' EXIT
    PG_DURABLE=1 PG_PRELOAD_LIBRARIES=pg_stat_statements,plpgsql PG_MAX_CONNECTIONS=${PG_MAX_CONNECTIONS:-300} \
        scripts/pg.sh start "$load_pg_dir" "$port"
    BENCH_LOAD_DATABASE_URL=$(scripts/pg.sh url "$port")
    swift build -c "$configuration" --product gateway
    BENCH_GATEWAY=$(swift build -c "$configuration" --show-bin-path)/gateway
    mkdir -p "$out"
    cc -O2 -Wall -Werror -o "$out/loadgen" "$source/loadgen.c"
    cc -O2 -Wall -Werror -static -o "$out/peak-rss" "$source/peak-rss.c"
    BENCH_LOADGEN=$PWD/$out/loadgen
    BENCH_C_DIRECTORY=$PWD/$out
    export BENCH_LOAD_DATABASE_URL BENCH_GATEWAY BENCH_LOADGEN BENCH_C_DIRECTORY
}

if [ "${1:-}" = "--inside" ]; then
    if [ "${BENCH_ONLY:-}" = startup ]; then
        # Only what the section runs: the bench itself, the shipped functions, the floors.
        swift build -c "$configuration" --product bench
        unpack_release
        stage_levers
        build_floors
        exec "$(swift build -c "$configuration" --show-bin-path)/bench" "${BENCH_OUTPUT:-docs/benchmarks.md}"
    fi
    if [ "${BENCH_ONLY:-}" = load ]; then
        # The shipped functions (make release's zips), then the host and the bench. BENCH_REUSE_ZIPS=1 keeps the zips
        # of an earlier make release (their build is the longest step).
        unpack_release
        prepare_load
        swift build -c "$configuration" --product bench
        # Not exec: the EXIT trap stops the load section's cluster.
        "$(swift build -c "$configuration" --show-bin-path)/bench" "${BENCH_OUTPUT:-docs/benchmarks.md}"
        exit
    fi
    if [ "${BENCH_ONLY:-}" = push ]; then
        # The fan-out and the sweep's backlog: the bench and push-sweep from this build, the emulator in-process.
        swift build -c "$configuration" --product bench
        swift build -c "$configuration" --product push-sweep
        exec "$(swift build -c "$configuration" --show-bin-path)/bench" "${BENCH_OUTPUT:-docs/benchmarks.md}"
    fi
    prepare_peer
    swift build -c "$configuration"
    unpack_release
    stage_levers
    build_floors
    prepare_load
    # The pgbench floor, from the PostgreSQL install.
    BENCH_PGBENCH=$(ls -d /usr/lib/postgresql/*/bin/pgbench 2>/dev/null | sort -V | tail -n 1 || true)
    export BENCH_PGBENCH
    # The pooler section: PgBouncer in transaction mode in front of the throwaway cluster, on a free port.
    pooler_dir=$(mktemp -d /tmp/caregiver-push-bench-pgbouncer.XXXXXX)
    chmod 755 "$pooler_dir"
    trap 'scripts/pgbouncer.sh stop "$pooler_dir/bouncer"; rm -rf "$pooler_dir"; scripts/pg.sh stop "$load_pg_dir"; rm -rf "$load_pg_dir"' EXIT
    pooler_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    upstream_port=$(echo "$DATABASE_URL" | sed -E 's#^[a-z]+://[^/]*:([0-9]+)/.*#\1#')
    BENCH_POOLER_POOL_SIZE=20
    scripts/pgbouncer.sh start "$pooler_dir/bouncer" "$pooler_port" "$upstream_port" "$BENCH_POOLER_POOL_SIZE"
    BENCH_POOLER_URL=$(scripts/pgbouncer.sh url "$pooler_port")
    export BENCH_POOLER_URL BENCH_POOLER_POOL_SIZE
    "$(swift build -c "$configuration" --show-bin-path)/bench" "${BENCH_OUTPUT:-docs/benchmarks.md}"
else
    # Enough connections for the pooler section's 200 direct cold invocations at once.
    export PG_MAX_CONNECTIONS=${PG_MAX_CONNECTIONS:-300}
    # PL/pgSQL loaded by the postmaster, as Supabase's image loads it (its shared_preload_libraries), so that a new
    # server backend does not load it at its first call (docs/decisions.md#plpgsql-preloaded).
    export PG_PRELOAD_LIBRARIES=${PG_PRELOAD_LIBRARIES:-plpgsql}
    # python3-venv for the peer; when it cannot be installed the venv step fails and the report says why.
    scripts/install-deps.sh --bench-peer || echo "bench: the peer's Python venv support is missing (see above)" >&2
    scripts/with-db.sh "${BENCH_PG_PORT:-25434}" scripts/bench.sh --inside
    # The figures the other documents quote from docs/benchmarks.md, rewritten from the new run (make test checks them).
    if [ "${BENCH_OUTPUT:-docs/benchmarks.md}" = docs/benchmarks.md ]; then
        python3 scripts/doc-figures.py --write
    fi
fi
