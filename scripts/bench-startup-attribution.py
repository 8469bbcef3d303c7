#!/usr/bin/env python3
"""Where a cold push-register's instructions go, against the C floor's: a callgrind profile split into categories.

    bench-startup-attribution.py OURS.callgrind FLOOR.callgrind [OURS_WALL_MS FLOOR_WALL_MS OURS_CPU_MS FLOOR_CPU_MS]

Both files are `valgrind --tool=callgrind --compress-strings=no --compress-pos=no` outputs of one run each (the
register event), OURS from an unstripped push-register (its own functions are named). Prints a markdown table on
stdout (scripts/bench-startup-profile.sh puts it in docs/benchmarks.md).

Every instruction of a run goes to exactly one category:

- a function's own instructions go to the category of the object and name it has (below);
- the "shared" code (glibc, libgcc, the Swift standard library and its retain/release/allocation entry points, and
  OpenSSL's libcrypto/libssl) is charged to whoever called it, in proportion to the calls' inclusive instructions,
  up the call graph until a non-shared caller: memcpy under JSONDecoder is JSON's, malloc under libpq is libpq's.
  OpenSSL's instructions keep their own row, split by that caller ("OpenSSL, from libpq" and so on);
- shared code with no caller at all (the process's entry and exit) is "process start and exit"; callgrind's
  "???" object (the PLT stubs between objects) is shared code too.

Categories: the dynamic loader (ld.so's own instructions: mapping, symbol lookup, relocation); the Swift runtime
(metadata, protocol conformances, its start-up); libpq and the libraries it loads (Kerberos, LDAP, GnuTLS, ...,
their constructors included); JSON (any Swift function whose name says JSON: Foundation's coders and Codecs'
JSONValue); Foundation (FoundationEssentials, the rest); our code (the functions' own modules, swift-log; for the C
floor, its main); OpenSSL by caller.

With the four figures (medians of the same run: wall time to stdout's EOF and CPU time, ours and the floor), the
instruction gap is also given in milliseconds: each category at the floor's own rate (its instructions per CPU
millisecond), then what the CPU gap has beyond that (kernel work: page faults, system calls) and what the wall-time
gap has beyond the CPU gap (waiting), so that the rows add up to the whole cold gap.
"""
import collections
import re
import sys

SHARED_OBJECTS = re.compile(r"/(ld-linux[^/]*|libc|libm|libgcc_s|libpthread|libdl|libstdc\+\+)\.so")
OPENSSL_OBJECTS = re.compile(r"/lib(crypto|ssl)\.so")
LOADER_OBJECT = re.compile(r"/ld-linux[^/]*\.so")
LIBPQ_CLOSURE = re.compile(
    r"/lib(pq|gssapi_krb5|krb5|k5crypto|krb5support|com_err|keyutils|ldap|ldap_r|lber|sasl2|gnutls|nettle|hogweed|"
    r"gmp|p11-kit|idn2|unistring|tasn1|ffi|resolv|brotli\w*|z|zstd|lz4)[-.0-9]*\.so")
# Swift runtime entry points that are per-operation work of their caller (not the runtime's own start-up).
SWIFT_SHARED_RUNTIME = re.compile(
    r"^_?swift_(retain|release|nonatomic_|bridgeObject|allocObject|deallocObject|deallocClassInstance|"
    r"beginAccess|endAccess|isUniquelyReferenced|arrayInit|arrayDestroy|arrayAssign|slowAlloc|slowDealloc|"
    r"unknownObject|initStackObject|setDeallocating|tryRetain|isDeallocating|allocBox|deallocBox|"
    r"projectBox|release_dealloc)")
SHARED_SWIFT_MODULES = {"Swift", "__C", "_StringProcessing", "_Concurrency", "Synchronization", "SwiftShims"}
FOUNDATION_MODULES = {
    "Foundation", "FoundationEssentials", "FoundationInternationalization", "_FoundationCollections",
    "_FoundationCShims", "FoundationNetworking",
}

LOADER = "the dynamic loader (ld.so's own instructions)"
RUNTIME = "the Swift runtime (metadata, conformances, its start-up)"
LIBPQ = "libpq and the libraries it loads (their constructors included)"
JSON = "JSON (Foundation's coders, Codecs' JSONValue)"
FOUNDATION = "Foundation (FoundationEssentials), not JSON"
OURS = "our code (the function's modules, swift-log; the C floor's main)"
START = "process start and exit (libc's entry, exit handlers)"
OTHER = "other libraries"
ORDER = [LOADER, RUNTIME, LIBPQ, JSON, FOUNDATION, OURS, START, OTHER]


def swift_module(name):
    """The module of a mangled Swift symbol (`$s6Codecs...` → Codecs, `$sSS...` → Swift), or None."""
    match = re.match(r"^_?\$s(.*)", name)
    if not match:
        return None
    rest = match.group(1)
    number = re.match(r"^(\d+)", rest)
    if number:
        length = int(number.group(1))
        return rest[len(number.group(1)):len(number.group(1)) + length]
    if rest.startswith(("So", "SC")):
        return "__C"
    return "Swift"


def classify(obj, fn, executable):
    """(shared, category): shared code is charged to its callers; `category` is the home of the rest."""
    if LOADER_OBJECT.search(obj):
        return False, LOADER
    if OPENSSL_OBJECTS.search(obj):
        return True, "OpenSSL"
    if SHARED_OBJECTS.search(obj) or obj == "???":
        # "???": the PLT stubs through which one object calls another, charged to the caller like glibc.
        return True, None
    if LIBPQ_CLOSURE.search(obj):
        return False, LIBPQ
    if obj != executable:
        return False, OTHER
    module = swift_module(fn)
    if module is not None:
        if module in SHARED_SWIFT_MODULES:
            return True, None
        if "JSON" in fn:
            return False, JSON
        if module in FOUNDATION_MODULES:
            return False, FOUNDATION
        return False, OURS
    if SWIFT_SHARED_RUNTIME.match(fn):
        return True, None
    if fn in ("_start", "__libc_csu_init", "__libc_csu_fini", "_init", "_fini", "frame_dummy",
              "register_tm_clones", "deregister_tm_clones", "__do_global_dtors_aux"):
        return True, None
    if re.match(r"^(_?swift|__swift|swift::|std::|__cxa|__gxx|_Unwind|\(anonymous namespace\)|__cxx|operator |"
                r"_GLOBAL__|__gnu_cxx|llvm::|__dynamic_cast|_ZN|_ZS|_ZT)", fn) or "::" in fn:
        return False, RUNTIME
    if fn.startswith("0x"):
        return False, RUNTIME if executable_is_swift(executable) else OURS
    return False, OURS


_swift_executables = {}


def executable_is_swift(executable):
    return _swift_executables.get(executable, False)


def parse(path):
    """(executable, self instructions by (object, function), inclusive instructions by call edge, total)."""
    self_cost = collections.Counter()
    edges = collections.Counter()
    executable = None
    total = 0
    obj = fn = None
    callee_obj = callee_fn = None
    in_call = False
    defined_in = collections.defaultdict(set)
    pending = []
    with open(path, errors="replace") as stream:
        for raw in stream:
            line = raw.rstrip("\n")
            if not line:
                continue
            if line.startswith("cmd:"):
                executable = line.split()[1] if len(line.split()) > 1 else None
            elif line.startswith(("summary:", "totals:")):
                total = int(line.split()[1])
            elif line.startswith("ob="):
                obj = line[3:]
            elif line.startswith("fn="):
                fn = line[3:]
                defined_in[fn].add(obj)
            elif line.startswith("cob="):
                callee_obj = line[4:]
            elif line.startswith("cfn="):
                callee_fn = line[4:]
            elif line.startswith("calls="):
                in_call = True
            elif line[0].isdigit() or line[0] in "+-*":
                fields = line.split()
                cost = int(fields[1]) if len(fields) > 1 else 0
                if in_call:
                    pending.append(((obj, fn), callee_obj, callee_fn, cost))
                    in_call = False
                    callee_obj = None
                else:
                    self_cost[(obj, fn)] += cost
    # A call line names its callee's object only when it is not the caller's (cob=); a name defined in exactly one
    # object is that object's.
    for caller, named_obj, name, cost in pending:
        if named_obj is None:
            objects = defined_in.get(name, set())
            named_obj = next(iter(objects)) if len(objects) == 1 else caller[0]
        if (named_obj, name) != caller:
            edges[(caller, (named_obj, name))] += cost
    return executable, self_cost, edges, total


def attribute(path):
    """Instructions by category (OpenSSL rows as ("OpenSSL", caller category)) and the run's total."""
    executable, self_cost, edges, total = parse(path)
    # The executable is the one object that is not a shared library (callgrind's cmd: may be a symlink or a relative
    # path); `main`'s object if there are several.
    programs = {obj for (obj, _) in self_cost if obj and obj != "???" and ".so" not in obj.rsplit("/", 1)[-1]}
    mains = {obj for (obj, fn) in self_cost if fn == "main"}
    executable = next(iter(mains & programs or programs or mains), executable)
    _swift_executables[executable] = any(swift_module(fn) for (_, fn) in self_cost)
    functions = set(self_cost) | {f for edge in edges for f in edge}
    kinds = {f: classify(f[0], f[1], executable) for f in functions}
    callers = collections.defaultdict(list)
    for (caller, callee), cost in edges.items():
        callers[callee].append((caller, cost))
    # share[f]: how f's cost divides among non-shared categories, through its callers (shared ones pushed further up;
    # repeated until it settles, for the call graph's cycles).
    share = {}
    for function, (shared, category) in kinds.items():
        share[function] = {START: 1.0} if shared else {category: 1.0}
    shared_functions = [f for f, (shared, _) in kinds.items() if shared]
    for _ in range(40):
        changed = 0.0
        for function in shared_functions:
            incoming = [(c, w) for c, w in callers.get(function, []) if w > 0 and c != function]
            weight = sum(w for _, w in incoming)
            if weight == 0:
                continue
            result = collections.Counter()
            for caller, w in incoming:
                for category, fraction in share[caller].items():
                    result[category] += fraction * w / weight
            changed += sum(abs(result.get(k, 0) - share[function].get(k, 0)) for k in set(result) | set(share[function]))
            share[function] = dict(result)
        if changed < 1e-9:
            break

    totals = collections.Counter()
    for function, cost in self_cost.items():
        shared, category = kinds[function]
        for home, fraction in share[function].items():
            key = ("OpenSSL", home) if category == "OpenSSL" else home
            totals[key] += cost * fraction
    return totals, total


def label(key):
    if isinstance(key, tuple):
        return "OpenSSL (libcrypto, libssl), from " + {
            LOADER: "the loader (its constructors)", LIBPQ: "libpq", OURS: "our code (the token's check, hashes)",
            START: "process start and exit (OpenSSL's atexit clean-up)", JSON: "JSON", FOUNDATION: "Foundation", RUNTIME: "the Swift runtime",
            OTHER: "other libraries"}.get(key[1], key[1])
    return key


def main():
    ours, ours_total = attribute(sys.argv[1])
    floor, floor_total = attribute(sys.argv[2])
    figures = [float(x) for x in sys.argv[3:7]] if len(sys.argv) >= 7 else None
    keys = [k for k in ORDER if k in ours or k in floor]
    keys += sorted({k for k in list(ours) + list(floor) if isinstance(k, tuple)}, key=lambda k: ORDER.index(k[1]))
    keys += [k for k in list(ours) + list(floor) if k not in keys]
    rate = None
    if figures and figures[3] > 0:
        rate = floor_total / figures[3]  # the floor's instructions per CPU millisecond
    header = "| category | push-register instructions | c/register instructions | difference | share of the difference |"
    rule = "|---|---:|---:|---:|---:|"
    if rate:
        header += " difference at the floor's rate, ms |"
        rule += "---:|"
    print(header)
    print(rule)
    difference = ours_total - floor_total
    for key in keys:
        a, b = ours.get(key, 0), floor.get(key, 0)
        if round(a) == 0 and round(b) == 0:
            continue
        row = f"| {label(key)} | {a:,.0f} | {b:,.0f} | {a - b:+,.0f} | {100 * (a - b) / difference:.0f}% |"
        if rate:
            row += f" {(a - b) / rate:+.2f} |"
        print(row)
    row = f"| **total** (callgrind's count) | **{ours_total:,}** | **{floor_total:,}** | **{difference:+,}** | 100% |"
    if rate:
        row += f" **{difference / rate:+.2f}** |"
    print(row)
    # One line for the goals' table (Tests/Benchmarks reads it): the four largest parts of the gap.
    parts = sorted(
        ((ours.get(k, 0) - floor.get(k, 0), k) for k in keys), key=lambda part: part[0], reverse=True)[:4]
    short = {LOADER: "loader", RUNTIME: "Swift runtime", LIBPQ: "libpq's closure", JSON: "JSON",
             FOUNDATION: "Foundation", OURS: "our code", START: "start and exit", OTHER: "other libraries"}
    def name(key):
        return f"OpenSSL from {short.get(key[1], key[1])}" if isinstance(key, tuple) else short.get(key, key)
    if rate:
        wall_ours, wall_floor, cpu_ours, cpu_floor = figures
        extra = [(cpu_ours - cpu_floor) - difference / rate, (wall_ours - wall_floor) - (cpu_ours - cpu_floor)]
        summary = ", ".join(f"{name(k)} {d / rate:+.2f} ms" for d, k in parts)
        summary += f", kernel {extra[0]:+.2f} ms, waiting {extra[1]:+.2f} ms"
    else:
        summary = ", ".join(f"{name(k)} {d:+,.0f} instructions" for d, k in parts)
    footer = f"Largest parts of the gap: {summary} (\"Where the cold gap goes\")"
    if rate:
        wall_ours, wall_floor, cpu_ours, cpu_floor = figures
        beyond_cpu = (cpu_ours - cpu_floor) - difference / rate
        waiting = (wall_ours - wall_floor) - (cpu_ours - cpu_floor)
        print()
        print(f"At the floor's rate ({rate / 1000:,.0f}k instructions per CPU ms: {floor_total:,} instructions in "
              f"{cpu_floor:.2f} ms of CPU), the instruction gap is {difference / rate:+.2f} ms. The rest of the "
              f"cold gap ({wall_ours - wall_floor:+.2f} ms: {wall_ours:.2f} against {wall_floor:.2f} ms to stdout's "
              f"EOF): CPU beyond the instructions' share, in the kernel (page faults, system calls: the CPU gap is "
              f"{cpu_ours - cpu_floor:+.2f} ms) {beyond_cpu:+.2f} ms; waiting (the wall-time gap beyond the CPU gap) "
              f"{waiting:+.2f} ms.")
    print()
    print(footer)


if __name__ == "__main__":
    main()
