"""Reads every ELF file of each Lambda zip given and fails on anything Amazon Linux 2023 (glibc 2.34) cannot load.

For each zip: every ELF file's version needs (`readelf -V`, section .gnu.version_r) must ask for GLIBC_2.34 at most;
`bootstrap` must have run path `$ORIGIN/lib` and each lib/ file `$ORIGIN`; and every DT_NEEDED name of every ELF
file must be either the host's (glibc's own, libgcc_s) or a file in the zip's lib/; nothing may need libstdc++
(AL2023's is GCC 11's, older than the build machine's: it is linked statically) and libgcc_s no more than GCC_7.0.0. Prints one line per zip with
its size and the highest glibc version anything in it needs, then `N passed, N failed`.

The libraries `bootstrap` loads with dlopen on first use (libcurl.so.4: Shared/Platform/C/CCurl) are not among its DT_NEEDED,
so they are checked by name: each must be in lib/, its whole dependency closure must resolve to the host's or lib/,
and `bootstrap` must not need it (it would be mapped at exec again).

    python3 scripts/zip-check.py dist/lambda/*.zip
"""
import os
import re
import subprocess
import sys
import tempfile
import zipfile

GLIBC_LIMIT = (2, 34)  # Amazon Linux 2023
# Loaded by bootstrap with dlopen (found through its run path $ORIGIN/lib), not linked.
DLOPENED = ["libcurl.so.4"]
# libgcc_s of AL2023's GCC 11 defines versions up to GCC_7.0.0 (GCC 12 added GCC_12.0.0).
GCC_LIMIT = (7, 0, 0)
# What the host provides: glibc's own libraries, and libgcc_s.
HOST_LIBRARIES = re.compile(
    r"^(ld-linux-x86-64|libc|libm|libpthread|libdl|librt|libresolv|libutil|libanl|libnss_[a-z]+|libBrokenLocale"
    r"|libmvec|libgcc_s)\.so"
)


def readelf(*arguments):
    return subprocess.run(["readelf", "--wide", *arguments], check=True, capture_output=True, text=True).stdout


def is_elf(path):
    with open(path, "rb") as file:
        return file.read(4) == b"\x7fELF"


def version_needs(path, prefix):
    """The PREFIX_x.y versions the file's version-needs section asks for (not the versions a library defines)."""
    needs, in_needs = set(), False
    for line in readelf("-V", path).splitlines():
        if line.startswith("Version needs section"):
            in_needs = True
        elif line.startswith("Version") and "section" in line:
            in_needs = False
        elif in_needs:
            match = re.search(r"Name: " + prefix + r"_(\d+)\.(\d+)(?:\.(\d+))?", line)
            if match:
                needs.add(tuple(int(part) for part in match.groups() if part is not None))
    return needs


def dynamic(path, tag):
    return re.findall(r"\(" + tag + r"\)\s+[^\[]*\[([^\]]*)\]", readelf("-d", path))


def unresolved_closure(directory, bundled, soname):
    """The names in the dependency closure of lib/SONAME that are neither the host's nor in lib/, as `a -> b`."""
    missing, seen, queue = [], {soname}, [soname]
    while queue:
        library = queue.pop()
        for needed in dynamic(os.path.join(directory, "lib", library), "NEEDED"):
            if HOST_LIBRARIES.match(needed) or needed in seen:
                continue
            if needed not in bundled:
                missing.append(f"{library} -> {needed}")
                continue
            seen.add(needed)
            queue.append(needed)
    return missing


def check(zip_path):
    problems, highest = [], (0, 0)
    with tempfile.TemporaryDirectory() as directory:
        with zipfile.ZipFile(zip_path) as archive:
            archive.extractall(directory)
            names = archive.namelist()
        if "bootstrap" not in names:
            return ["no bootstrap at the zip's root"], highest
        bundled = {name[len("lib/"):] for name in names if name.startswith("lib/")}
        for name in names:
            path = os.path.join(directory, name)
            if not is_elf(path):
                continue
            for version in version_needs(path, "GLIBC"):
                highest = max(highest, version)
                if version > GLIBC_LIMIT:
                    problems.append(f"{name} needs GLIBC_{'.'.join(map(str, version))}")
            if "Name: GLIBC_PRIVATE" in readelf("-V", path):
                problems.append(f"{name} needs GLIBC_PRIVATE, which differs between glibc builds")
            for version in version_needs(path, "GCC"):
                if version > GCC_LIMIT:
                    problems.append(f"{name} needs GCC_{'.'.join(map(str, version))} of libgcc_s")
            for version in version_needs(path, "GLIBCXX") | version_needs(path, "CXXABI"):
                problems.append(f"{name} needs the host's libstdc++ ({'.'.join(map(str, version))}); link it statically")
            for needed in dynamic(path, "NEEDED"):
                if not HOST_LIBRARIES.match(needed) and needed not in bundled:
                    problems.append(f"{name} needs {needed}, which is neither the host's (glibc, libgcc_s) nor in lib/")
            if name == "bootstrap":
                for library in DLOPENED:
                    if library in dynamic(path, "NEEDED"):
                        problems.append(f"bootstrap needs {library} at exec; it should dlopen it on first use")
            runpath = dynamic(path, "RUNPATH") + dynamic(path, "RPATH")
            expected = ["$ORIGIN/lib"] if name == "bootstrap" else ["$ORIGIN"]
            if name == "bootstrap" or name.startswith("lib/"):
                if runpath != expected:
                    problems.append(f"{name} has run path {runpath}, not {expected}")
        for library in DLOPENED:
            if library not in bundled:
                problems.append(f"lib/{library} is missing (bootstrap loads it with dlopen on its first FCM, OAuth or secrets request)")
                continue
            for link in unresolved_closure(directory, bundled, library):
                problems.append(f"lib/{library}'s dependency closure does not resolve inside the zip: {link}")
    return problems, highest


def main():
    failed = 0
    for zip_path in sys.argv[1:]:
        problems, highest = check(zip_path)
        size = os.path.getsize(zip_path) / 1e6
        status = "ok  " if not problems else "FAIL"
        print(f"{status} {zip_path}: {size:.1f} MB, highest glibc needed GLIBC_{highest[0]}.{highest[1]}")
        for problem in problems:
            print(f"     {problem}")
        failed += 1 if problems else 0
    if not sys.argv[1:]:
        print("zip-check: no zip given")
        return 1
    print(f"{len(sys.argv) - 1 - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
