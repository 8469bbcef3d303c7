#!/usr/bin/env bash
# needed-order.sh ELF: reorders the executable's DT_NEEDED entries so that libc (and libpq, libcrypto, the loader)
# come before libssl, libm and libgcc_s, which the Swift link lists first (scripts/release.sh runs this on every
# bootstrap; docs/benchmarks.md, "Cold-start levers", has its measured effect).
#
# Why: the loader resolves every symbol of every library through the global scope in that order, the executable's
# DT_NEEDED first. libpq's dependency closure (Kerberos, LDAP, GnuTLS, ...) looks up mostly libc's symbols, and each
# lookup first misses in every library listed ahead of libc: a C program linked against libpq lists libc right
# after libpq and libcrypto. The entries themselves (and the symbol versions, .gnu.version_r) are unchanged: only
# their order. patchelf --add-needed puts an entry first, so the early ones are removed and added back in reverse.
set -euo pipefail
file=${1:?usage: needed-order.sh ELF}
late='^(libssl|libm|libgcc_s)\.so'
needed=($(readelf -d "$file" | awk '/\(NEEDED\)/ {gsub(/[][]/, "", $NF); print $NF}'))
early=()
for name in "${needed[@]}"; do
    [[ "$name" =~ $late ]] || early+=("$name")
done
[ ${#early[@]} -gt 0 ] || exit 0
remove=()
for name in "${early[@]}"; do
    remove+=(--remove-needed "$name")
done
patchelf "${remove[@]}" "$file"
for ((index = ${#early[@]} - 1; index >= 0; index--)); do
    patchelf --add-needed "${early[$index]}" "$file"
done
# The same set, in the new order: early ones first, in their old order, then the late ones.
after=($(readelf -d "$file" | awk '/\(NEEDED\)/ {gsub(/[][]/, "", $NF); print $NF}'))
[ "$(printf '%s\n' "${after[@]}" | sort)" = "$(printf '%s\n' "${needed[@]}" | sort)" ] || {
    echo "needed-order: $file lost or gained a DT_NEEDED entry" >&2
    exit 1
}
