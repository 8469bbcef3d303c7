#!/usr/bin/env bash
# `make image`: the container image of infra/docker/Dockerfile, built with buildah (no Docker daemon, no registry).
#
#   1. The release artifacts: the Lambda zips of `make release` (unless IMAGE_REUSE_ZIPS=1 and they exist) and a
#      release build of the gateway with the same flags, so the image and the zips carry the same function binaries.
#   2. The build context, .build/image/context/app: bin/<function> (each zip's bootstrap), bin/gateway, bin/lib/ (the
#      zips' bundled libraries, plus the gateway's), infra/functions.json and migrations, certs/ca-certificates.crt.
#   3. `buildah bud --isolation chroot` with BASE as the runtime base: IMAGE_BASE when given (e.g.
#      debian:12.11-slim, pulled as usual), else the debootstrap root of `make minroot` imported as
#      localhost/caregiver-push-minroot, so that the build needs nothing from outside.
#
# Tags IMAGE_TAG (default localhost/caregiver-push:latest) and prints its size and the time each step took.
set -euo pipefail
cd "$(dirname "$0")/.."

tag=${IMAGE_TAG:-localhost/caregiver-push:latest}
export STORAGE_DRIVER=${STORAGE_DRIVER:-vfs}  # no overlay inside these machines' containers
command -v buildah >/dev/null || { echo "image: buildah is missing (scripts/install-deps.sh installs it)" >&2; exit 1; }
started=$(date +%s)
stamp() { echo "image: $1 after $(($(date +%s) - started)) s" >&2; }

# The function list is infra/functions.json (FunctionListTests checks Package.swift's products against it).
functions=($(python3 -c 'import json; print(" ".join(f["name"] for f in json.load(open("infra/functions.json"))["functions"]))'))
[ ${#functions[@]} -gt 0 ] || { echo "image: no functions found in infra/functions.json" >&2; exit 1; }

# 1. Release artifacts.
if [ "${IMAGE_REUSE_ZIPS:-0}" != 1 ] || ! ls dist/lambda/*.zip >/dev/null 2>&1; then
    scripts/release.sh
fi
link=.build/lambda-link  # made by scripts/release.sh: the same link inputs for the gateway
link_flags=(-Xlinker -L -Xlinker "$PWD/$link" -Xlinker "$PWD/$link/glibc-compat.o")
for symbol in hypot hypotf arc4random; do link_flags+=(-Xlinker "--wrap=$symbol"); done
swift build -c release --static-swift-stdlib "${link_flags[@]}" --product gateway
bin=$(swift build -c release --static-swift-stdlib "${link_flags[@]}" --show-bin-path)
stamp "release artifacts ready"

# 2. The context.
context=.build/image/context
rm -rf "$context"
mkdir -p "$context/app/bin/lib" "$context/app/infra" "$context/app/certs"
unpacked=$(mktemp -d /tmp/caregiver-push-image.XXXXXX)
trap 'rm -rf "$unpacked"' EXIT
for function in "${functions[@]}"; do
    zip=dist/lambda/$function.zip
    [ -f "$zip" ] || { echo "image: $zip is missing (make release)" >&2; exit 1; }
    python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$zip" "$unpacked/$function"
    install -m 0755 "$unpacked/$function/bootstrap" "$context/app/bin/$function"
    for library in "$unpacked/$function"/lib/*; do
        target="$context/app/bin/lib/$(basename "$library")"
        if [ -e "$target" ] && ! cmp -s "$library" "$target"; then
            echo "image: two zips bundle different $(basename "$library")" >&2
            exit 1
        fi
        install -m 0644 "$library" "$target"
    done
done
# The gateway (not the developer's `runner`): its libraries beyond glibc next to the functions' (the same files where
# the sonames meet).
install -m 0755 "$bin/gateway" "$context/app/bin/gateway"
# Its DWARF only (the symbol table stays, for backtraces): 150 MB of debug information has no use in the image.
strip --strip-debug "$context/app/bin/gateway"
host_libraries='^(linux-vdso|ld-linux-x86-64|libc|libm|libpthread|libdl|librt|libresolv|libutil|libanl|libnss_[a-z]+|libBrokenLocale|libmvec|libgcc_s)\.so'
ldd "$bin/gateway" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u | while read -r soname path; do
    [[ "$soname" =~ $host_libraries ]] && continue
    [ -e "$context/app/bin/lib/$soname" ] && continue
    cp -L "$path" "$context/app/bin/lib/$soname"
    chmod 0644 "$context/app/bin/lib/$soname"
    patchelf --set-rpath '$ORIGIN' "$context/app/bin/lib/$soname"
done
patchelf --set-rpath '$ORIGIN/lib' "$context/app/bin/gateway"
cp infra/functions.json "$context/app/infra/functions.json"
cp -r infra/migrations "$context/app/infra/migrations"
# An operator's mapping onto the app's own tables (docs/deploy.md#bring-your-own-tables) travels with the migrations.
if [ -n "${APP_MAPPING:-}" ]; then cp "$APP_MAPPING" "$context/app/infra/migrations"/app-mapping.sql; fi
cp -L /etc/ssl/certs/ca-certificates.crt "$context/app/certs/ca-certificates.crt"
chmod -R a+rX,go-w "$context/app"
stamp "context staged ($(du -sh "$context" | cut -f1))"

# 3. The base and the build.
if [ -n "${IMAGE_BASE:-}" ]; then
    base=$IMAGE_BASE
else
    base=localhost/caregiver-push-minroot:latest
    marker=.build/minroot/.caregiver-push-minroot
    scripts/minroot.sh >/dev/null
    # Imported once per minroot: the marker's date is the import's label.
    if [ "$(buildah inspect --type image --format '{{index .OCIv1.Config.Labels "minroot"}}' "$base" 2>/dev/null)" \
        != "$(cat "$marker")" ]; then
        container=$(buildah from scratch)
        mountpoint=$(buildah mount "$container")
        tar -C .build/minroot --exclude ./var/task-check.* --exclude ./proc/* -cf - . | tar -C "$mountpoint" -xf -
        buildah umount "$container" >/dev/null
        buildah config --label "minroot=$(cat "$marker")" "$container"
        buildah commit --quiet --rm "$container" "$base" >/dev/null
        stamp "minroot imported as $base"
    fi
fi
previous=$(buildah images --quiet "$tag" 2>/dev/null || true)
buildah bud --quiet --isolation chroot --pull=missing --layers=false --build-arg "BASE=$base" \
    -f infra/docker/Dockerfile -t "$tag" "$context" >/dev/null
# The image the tag named before is left untagged by the build: remove it, or every build keeps 500 MB.
if [ -n "$previous" ] && [ "$previous" != "$(buildah images --quiet "$tag")" ]; then
    buildah rmi "$previous" >/dev/null 2>&1 || true
fi
size=$(buildah images --format '{{.Size}}' "$tag" | head -n 1)
stamp "built $tag on $base: $size"
echo "$tag"
