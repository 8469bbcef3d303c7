#!/usr/bin/env bash
# `make release`: release builds of the functions with the Swift runtime linked in (--static-swift-stdlib), and one
# self-contained AWS Lambda zip per function in dist/lambda/ for `provided.al2023`, needing no layer:
#
#   bootstrap          the function's binary, run path (DT_RUNPATH) `$ORIGIN/lib`
#   lib/*.so.*         every shared library it loads beyond glibc (libpq, OpenSSL, their dependencies; and libcurl
#                      with its own, which ldd of the binary does not show: the first FCM, OAuth or secrets request
#                      dlopens it, and the loader searches the binary's run path for it), each with run path `$ORIGIN`,
#                      so that their own dependencies also resolve from lib/
#   migrations/        db-migrate only: infra/migrations, which it applies (docs/deploy.md, "Migrations")
#   database-ca.pem    only with DATABASE_CA_BUNDLE=<PEM file>: the database provider's CA bundle, which
#                      sslmode=verify-full checks the server against (PGSSLROOTCERT=/var/task/database-ca.pem)
#
# What stays the host's: glibc (Amazon Linux 2023 has 2.34) and libgcc_s (GCC's unwinder, on every Lambda image).
# To keep every glibc symbol version at 2.34 or older on a build machine with a newer glibc (Debian 12: 2.36),
# libstdc++ (GCC 12's needs GLIBC_2.36 and GLIBCXX_3.4.30, which AL2023's GCC 11 lacks) is linked statically, and
# scripts/lambda-glibc-compat.c stands in for the three references that would need 2.35 or 2.36. scripts/zip-check.py
# (make test) fails when anything in a zip needs more. Zipped and unzipped sizes are printed per zip.
#
# For the benchmark's cold-start levers (scripts/bench.sh), a variant build elsewhere: RELEASE_FUNCTIONS (a
# space-separated subset), RELEASE_SWIFTC_FLAGS (more -Xswiftc flags, space-separated), RELEASE_SCRATCH_PATH (its own
# build folder, default .build) and RELEASE_DIST (where the zips go, default dist).
set -euo pipefail
cd "$(dirname "$0")/.."

# The function list is infra/functions.json (routed, scheduled and deploy-time functions alike).
functions=($(python3 -c 'import json; print(" ".join(f["name"] for f in json.load(open("infra/functions.json"))["functions"]))'))
if [ -n "${RELEASE_FUNCTIONS:-}" ]; then
    functions=($RELEASE_FUNCTIONS)
fi
scratch=${RELEASE_SCRATCH_PATH:-.build}
dist=${RELEASE_DIST:-dist}
[ ${#functions[@]} -gt 0 ] || { echo "release: no functions found in infra/functions.json" >&2; exit 1; }
# Loaded with dlopen on first use (Shared/Platform/C/CCurl), so not among the binary's DT_NEEDED: bundled by name, with the
# closure of their own dependencies, from where this machine's loader finds them.
dlopened=(libcurl.so.4)
dlopened_paths=()
for soname in "${dlopened[@]}"; do
    # awk reads ldconfig's whole list: leaving at the first match ends ldconfig with SIGPIPE whenever it is still
    # writing then (more likely the longer the list), and pipefail makes that the script's silent exit 141.
    path=$(PATH="$PATH:/sbin:/usr/sbin" ldconfig -p \
        | awk -v soname="$soname" '$1 == soname && /x86-64/ && path == "" {path = $NF} END {print path}')
    [ -n "$path" ] || { echo "release: $soname not found (apt-get install libcurl4-openssl-dev)" >&2; exit 1; }
    dlopened_paths+=("$path")
done
# The host's libraries (glibc's own, and libgcc_s): its copies must be used, never bundled ones.
host_libraries='^(linux-vdso|ld-linux-x86-64|libc|libm|libpthread|libdl|librt|libresolv|libutil|libanl|libnss_[a-z]+|libBrokenLocale|libmvec|libgcc_s)\.so'

# Link inputs for the Lambda builds: a directory holding only libstdc++.a (searched before the system's, so the
# runtime's -lstdc++ links it statically) and the compatibility object.
link=$scratch/lambda-link
mkdir -p "$link"
libstdcxx=$(clang -print-file-name=libstdc++.a)
[ -f "$libstdcxx" ] || { echo "release: libstdc++.a not found (apt-get install libstdc++-12-dev)" >&2; exit 1; }
ln -sf "$libstdcxx" "$link/libstdc++.a"
clang -O2 -fPIC -c scripts/lambda-glibc-compat.c -o "$link/glibc-compat.o"
link_flags=(-Xlinker -L -Xlinker "$PWD/$link" -Xlinker "$PWD/$link/glibc-compat.o")
for symbol in hypot hypotf arc4random; do
    link_flags+=(-Xlinker "--wrap=$symbol")
done
link_flags+=(--scratch-path "$scratch")
for flag in ${RELEASE_SWIFTC_FLAGS:-}; do
    link_flags+=(-Xswiftc "$flag")
done

# One product per invocation: `swift build` builds only the last of several --product options.
for function in "${functions[@]}"; do
    swift build -c release --static-swift-stdlib "${link_flags[@]}" --product "$function"
done
bin=$(swift build -c release --static-swift-stdlib "${link_flags[@]}" --show-bin-path)
rm -rf "$dist/lambda" "$dist/lambda-debug"
mkdir -p "$dist/lambda"
for function in "${functions[@]}"; do
    stage=$dist/lambda/$function
    mkdir -p "$stage/lib"
    # Shipped stripped: the symbol and debug sections (most of the file) stay here, in dist/lambda-debug, linked by
    # a .gnu_debuglink, for gdb and symbolised crash reports (RELEASE_STRIP=0 ships the unstripped binary).
    if [ "${RELEASE_STRIP:-1}" = 1 ]; then
        mkdir -p "$dist/lambda-debug"
        objcopy --only-keep-debug "$bin/$function" "$dist/lambda-debug/$function.debug"
        objcopy --strip-all --add-gnu-debuglink="$dist/lambda-debug/$function.debug" "$bin/$function" \
            "$stage/bootstrap"
    else
        cp "$bin/$function" "$stage/bootstrap"
    fi
    # ldd lists the whole closure (the libraries' own dependencies too), each by the name the loader looks for; of
    # the binary, and of each dlopen'ed library (which ldd does not list itself).
    {
        ldd "$bin/$function"
        for index in "${!dlopened[@]}"; do
            echo "${dlopened[$index]} => ${dlopened_paths[$index]} (dlopen)"
            ldd "${dlopened_paths[$index]}"
        done
    } | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u | while read -r soname path; do
        if [[ "$soname" =~ $host_libraries ]]; then
            continue
        fi
        cp -L "$path" "$stage/lib/$soname"
        chmod 0644 "$stage/lib/$soname"
        patchelf --set-rpath '$ORIGIN' "$stage/lib/$soname"
    done
    patchelf --set-rpath '$ORIGIN/lib' "$stage/bootstrap"
    # libc ahead of libssl, libm and libgcc_s in the loader's lookup scope (RELEASE_NEEDED_ORDER=0: as linked).
    if [ "${RELEASE_NEEDED_ORDER:-1}" = 1 ]; then
        scripts/needed-order.sh "$stage/bootstrap"
    fi
    if [ "$function" = db-migrate ]; then
        cp -r infra/migrations "$stage/migrations"
        # An operator's mapping onto the app's own tables (docs/deploy.md#bring-your-own-tables) travels with the migrations.
        if [ -n "${APP_MAPPING:-}" ]; then cp "$APP_MAPPING" "$stage/migrations"/app-mapping.sql; fi
    fi
    # The database provider's CA bundle, for sslmode=verify-full (the template's PGSSLROOTCERT points here).
    if [ -n "${DATABASE_CA_BUNDLE:-}" ]; then
        cp "$DATABASE_CA_BUNDLE" "$stage/database-ca.pem"
        chmod 0644 "$stage/database-ca.pem"
    fi
    python3 - "$stage" "$dist/lambda/$function.zip" <<'PY'
import os, sys, zipfile
stage, target = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
    for directory, _, files in sorted(os.walk(stage)):
        for name in sorted(files):
            path = os.path.join(directory, name)
            info = zipfile.ZipInfo(os.path.relpath(path, stage))
            executable = info.filename == "bootstrap"
            info.external_attr = (0o100755 if executable else 0o100644) << 16  # regular files, bootstrap executable
            info.compress_type = zipfile.ZIP_DEFLATED
            with open(path, "rb") as source:
                archive.writestr(info, source.read())
PY
    rm -rf "$stage"
    python3 - "$dist/lambda/$function.zip" <<'PY'
import os, sys, zipfile
path = sys.argv[1]
unzipped = sum(info.file_size for info in zipfile.ZipFile(path).infolist())
print(f"{path}: {os.path.getsize(path) / 1e6:.1f} MB zipped, {unzipped / 1e6:.1f} MB unzipped")
PY
done
