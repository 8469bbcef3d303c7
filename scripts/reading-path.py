#!/usr/bin/env python3
"""Counts a reading path from a first-entry trace (scripts/reading-path.sh writes one).

The trace lists, in the order they were first entered, the functions of the project's own source that one request
ran (`file:line<TAB>symbol<TAB>caller files`). A newcomer follows them in that order and opens each called
definition once: a definition is a type's declaration or extension in one file (read whole, its nested types and
members with it) or a free function. Counted, to the moment stdout is closed (the response is with the host) and to
the end (through the push):

- files: distinct files opened;
- jumps back: moves into a file already opened — back into a caller's file to read on there, and the two below;
- look-ups: moves into a file already opened, to read a definition there not yet read, when no caller on the call
  stack is in that file (the reader has left that file and must go back to it);
- closure returns: moves back into a file already left, into a closure handed across files and called back from
  the other.

A call into a definition already read is no move (the reader knows it). Moving into a file that a caller on the
stack is in is reading on in that file, and returns to a caller are not moves of their own: its file is open where
the reader left it. Compiler-made entries are left out: default-argument generators, the synthesized members with
no line of their own, and lazy globals' one-time initializers. Two views: the service's own code (stopping at the
platform package's API, as a reader stops at postgres-nio's), and everything including the platform package
(Shared/Platform). The finer count, every function a definition of its own, is given beside it.

    scripts/reading-path.py TRACE
"""
import re
import subprocess
import sys

CLOSURE = re.compile(r"fU\d*_")
# The platform's modules, wherever they sit (Shared/Platform/ now; the same modules directly under Shared/ before
# they became a package of their own), so that one layout's count can be set beside another's.
PLATFORM = re.compile(r"^Shared/(Platform/)?(Codecs|Libpq|Curl|OpenSSLCrypto|JOSE|FunctionRuntime|C/CCurl|C/COpenSSL|C/CLibpq)/")
DEFAULT_ARGUMENT = re.compile(r"fA\d*_")


ACCESSOR = re.compile(r"\.(getter|setter|modify|unsafeMutableAddressor|_read|_modify|didset|willset)$")


def definition(name):
    """The definition a demangled name belongs to: its outermost type (`AppID` for `AppID.postgresText.getter`,
    `DoseRecord` for `closure #2 in DoseRecord.handle(_:context:writer:)`), or the free function itself."""
    name = name.rpartition(" in ")[2].removeprefix("static ")
    name = re.sub(r"<[^<>]*>", "", re.sub(r"<[^<>]*>", "", name)).split("(", 1)[0].strip()
    name = ACCESSOR.sub("", name)
    parts = name.split(".")
    return parts[0] if len(parts) > 1 else name


def read(path):
    rows = []
    for line in open(path, encoding="utf-8"):
        location, _, rest = line.rstrip("\n").partition("\t")
        symbol, _, callers = rest.partition("\t")
        file, _, number = location.rpartition(":")
        if DEFAULT_ARGUMENT.search(symbol) or number in ("0", ""):
            continue
        rows.append((file, int(number), symbol, [c for c in callers.split(",") if c]))
    names = subprocess.run(
        ["swift", "demangle", "--simplified", "--compact"], input="\n".join(r[2] for r in rows),
        capture_output=True, text=True, check=True).stdout.split("\n")
    return [
        (file, number, symbol, callers, definition(name))
        for (file, number, symbol, callers), name in zip(rows, names)
        if not name.startswith("one-time initialization function for")
    ]


def count(entries, per_function=False):
    opened, known, order, lookups, closures, returns, last = set(), set(), [], [], [], 0, None
    for file, number, symbol, callers, name in entries:
        key = (file, f"{number}:{symbol}" if per_function else name)
        closure_back = CLOSURE.search(symbol) and file != last and file not in callers
        if key in known and not closure_back:
            continue
        known.add(key)
        if file == last:
            continue
        last = file
        if file in opened:
            if file in callers:
                returns += 1
                continue
            (closures if closure_back else lookups).append(f"{file}:{number} ({name})")
        else:
            opened.add(file)
            order.append(file)
    return order, returns + len(lookups) + len(closures), lookups, closures


def report(title, entries):
    order, jumps, lookups, closures = count(entries)
    fine = count(entries, per_function=True)
    lines = [f"### {title}", "",
             f"{len(order)} files, {jumps} jumps back: {len(lookups)} look-ups, {len(closures)} closure returns "
             f"(every function a definition: {len(fine[0])} files, {fine[1]} jumps back: {len(fine[2])} look-ups, "
             f"{len(fine[3])} closure returns)", ""]
    lines += [f"{i + 1}. `{file}`" for i, file in enumerate(order)]
    if lookups or closures:
        lines += ["", "Look-ups: " + (", ".join(f"`{x}`" for x in lookups) or "none"),
                  "", "Closure returns: " + (", ".join(f"`{x}`" for x in closures) or "none")]
    return lines + [""]


def main() -> int:
    entries = read(sys.argv[1])
    closed = next((i for i, e in enumerate(entries) if "closeOutput" in e[2]), None)
    if closed is None:
        print("reading-path: stdout was never closed in the trace", file=sys.stderr)
        return 1
    def app(entries):
        return [
            (f, n, s, [c for c in callers if not PLATFORM.match(c)], d)
            for f, n, s, callers, d in entries
            if not PLATFORM.match(f)
        ]

    out = ["# The reading path of one `dose-record` (one-shot, caregiver token, push owed)", "",
           "Generated by `scripts/reading-path.sh` from a first-entry trace (gdb); counted by "
           "`scripts/reading-path.py`.", ""]
    out += report("To stdout, the service's own code", app(entries[: closed + 1]))
    out += report("Through the push, the service's own code", app(entries))
    out += report("To stdout, the platform package included", entries[: closed + 1])
    out += report("Through the push, the platform package included", entries)
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
