#!/usr/bin/env bash
# `make release`: release builds of the six functions with the Swift runtime linked in (--static-swift-stdlib),
# and one AWS Lambda zip per function holding its binary as `bootstrap` (provided.al2023), in dist/lambda/.
# libpq, libcurl and OpenSSL stay dynamic: provided.al2023 has libcurl and OpenSSL; libpq comes from a layer or
# the container image (docs/deploy.md).
set -euo pipefail
cd "$(dirname "$0")/.."

functions=(push-register push-unregister dose-record slot-bulk-record prn-record push-sweep)
# One product per invocation: `swift build` builds only the last of several --product options.
for function in "${functions[@]}"; do
    swift build -c release --static-swift-stdlib --product "$function"
done
bin=$(swift build -c release --static-swift-stdlib --show-bin-path)
mkdir -p dist/lambda
for function in "${functions[@]}"; do
    python3 - "$bin/$function" "dist/lambda/$function.zip" <<'PY'
import sys, zipfile
source, target = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
    info = zipfile.ZipInfo("bootstrap")
    info.external_attr = 0o100755 << 16  # a regular, executable file
    info.compress_type = zipfile.ZIP_DEFLATED
    archive.writestr(info, open(source, "rb").read())
PY
    echo "dist/lambda/$function.zip"
done
