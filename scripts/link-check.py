#!/usr/bin/env python3
"""What each shipped product links, transitively: the image's `gateway` carries no domain code, and a function
carries no server framework.

Two readings, both must pass:
1. the manifest (`swift package dump-package`): each shipped product's targets and, through them, every target and
   package product they depend on, however indirectly (a target that imports only the migrator but depends on a
   target that depends on the domain links the domain);
2. the built executables (`--bin DIR`, the build's bin path): the Swift symbols each one defines, by module — what
   the linker really put in, whatever the manifest says.

    scripts/link-check.py [--bin DIR]
"""
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# What each shipped product must not link: the image's host carries no domain (the migrator apart), no token or key
# handling of the domain's, and none of the developer's tools; a function carries no HTTP server framework.
DOMAIN = {"CaregiverPush", "JOSE", "FCMEmulator", "TestSupport"}
SERVER = {"Hummingbird", "HummingbirdCore", "HummingbirdHTTP2", "NIOCore", "NIOPosix", "NIOSSL", "FCMEmulator",
          "ProcessSupervision", "FunctionGateway"}
FORBIDDEN = {"gateway": DOMAIN}
# Every function of the function list (infra/functions.json).
FUNCTIONS = [f["name"] for f in json.loads((ROOT / "infra/functions.json").read_text())["functions"]]
for name in FUNCTIONS:
    FORBIDDEN[name] = SERVER


def closure(manifest, product):
    targets = {t["name"]: t for t in manifest["targets"]}
    (entry,) = [p for p in manifest["products"] if p["name"] == product]
    seen, stack = set(), list(entry["targets"])
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        for dependency in targets.get(name, {}).get("dependencies", []):
            kind, value = next(iter(dependency.items()))
            if kind in ("byName", "target"):
                stack.append(value[0])
            elif kind == "product":
                seen.add(value[0])
    return seen


def swift_modules(binary: Path):
    """The modules whose Swift symbols the binary defines (`$s<length><Module>…`)."""
    out = subprocess.run(["nm", "--defined-only", str(binary)], capture_output=True, text=True, check=True).stdout
    modules = set()
    for m in re.finditer(r"\$s(\d+)([A-Za-z_]\w*)", out):
        length = int(m.group(1))
        modules.add(m.group(2)[:length])
    return modules


def main() -> int:
    bin_dir = Path(sys.argv[sys.argv.index("--bin") + 1]) if "--bin" in sys.argv else None
    manifest = json.loads(
        subprocess.run(["swift", "package", "dump-package"], cwd=ROOT, capture_output=True, text=True,
                       check=True).stdout)
    failures = 0
    for product, forbidden in FORBIDDEN.items():
        linked = closure(manifest, product)
        bad = sorted(linked & forbidden)
        if bad:
            failures += 1
            print(f"link-check: {product} depends on {', '.join(bad)} (Package.swift, transitively)", file=sys.stderr)
        if bin_dir:
            binary = bin_dir / product
            if not binary.exists():
                failures += 1
                print(f"link-check: {binary} is not built", file=sys.stderr)
                continue
            bad = sorted(swift_modules(binary) & forbidden)
            if bad:
                failures += 1
                print(f"link-check: {binary} holds code of {', '.join(bad)}", file=sys.stderr)
    if failures:
        return 1
    print(f"link-check: {len(FORBIDDEN)} shipped products link none of what they must not"
          + (" (manifest and binaries)" if bin_dir else " (manifest)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
