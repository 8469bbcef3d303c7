#!/usr/bin/env python3
"""The domain's floor plan: which folder of Shared/CaregiverPush refers to which, and no two both ways.

A folder refers to another when one of its files names a top-level type, a free function or a member that is
declared in the other folder only (comments and string literals removed first). Types and free functions count wherever their name
appears; a member (a method, property or case declared inside a type or an extension) counts when it is used as
`.name` and no other folder of the domain declares a member of that name. The references are listed, folder by
folder; any pair that refers both ways fails the check (exit 1), with the files and names that make each direction,
and so does any longer cycle; otherwise the folders' order, bottom to top, is printed.

    scripts/floor-plan.py [ROOT]        ROOT defaults to Shared/CaregiverPush
"""
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(sys.argv[1] if len(sys.argv) > 1 else "Shared/CaregiverPush")
# Members of these names are the standard library's or Foundation's as often as ours: a `.count` says nothing about
# which folder it reaches.
COMMON = set(
    "count first last isEmpty map filter contains add append insert remove removeAll failure success none some hash "
    "code contents number of query close isOpen value values keys description rawValue data text date string init "
    "self type error errors message name id url body status headers run result results start end next min max".split()
)

TYPE_DECL = re.compile(r"\b(?:struct|class|enum|protocol|actor|typealias|associatedtype)\s+([A-Za-z_][A-Za-z0-9_]*)")
FUNC_DECL = re.compile(r"\bfunc\s+([A-Za-z_][A-Za-z0-9_]*)")
MEMBER_DECL = re.compile(r"\b(?:func|var|let|case)\s+([A-Za-z_][A-Za-z0-9_]*)")
IDENT = re.compile(r"(\.?)\b([A-Za-z_][A-Za-z0-9_]*)\b")


def strip(source: str) -> str:
    """The source without comments and string literals (multi-line strings included), lines kept."""
    out, i, n = [], 0, len(source)
    while i < n:
        if source.startswith("//", i):
            j = source.find("\n", i)
            i = n if j < 0 else j
        elif source.startswith("/*", i):
            j = source.find("*/", i + 2)
            out.append("\n" * source.count("\n", i, n if j < 0 else j))
            i = n if j < 0 else j + 2
        elif source.startswith('"""', i):
            j = source.find('"""', i + 3)
            out.append('""' + "\n" * source.count("\n", i, n if j < 0 else j))
            i = n if j < 0 else j + 3
        elif source[i] == '"':
            j = i + 1
            while j < n and source[j] != '"' and source[j] != "\n":
                j += 2 if source[j] == "\\" else 1
            out.append('""')
            i = j + 1
        else:
            out.append(source[i])
            i += 1
    return "".join(out)


def folder_of(path: Path) -> str:
    parts = path.relative_to(ROOT).parts
    return parts[0] if len(parts) > 1 else "."


def top_level_lines(text: str):
    """(depth at line start, line) for each line: the brace depth tells top-level declarations from members."""
    depth = 0
    for line in text.split("\n"):
        yield depth, line
        depth += line.count("{") - line.count("}")


def main() -> int:
    files = sorted(ROOT.rglob("*.swift"))
    if not files:
        print(f"floor-plan: no Swift files under {ROOT}", file=sys.stderr)
        return 1
    texts = {f: strip(f.read_text()) for f in files}
    # Member names declared outside the domain (the platform, the hosts, the kit) are ambiguous too.
    elsewhere = set()
    repository = Path(__file__).resolve().parent.parent
    for f in repository.glob("*/**/*.swift"):
        if ROOT.resolve() in f.resolve().parents or ".build" in f.parts:
            continue
        elsewhere.update(m.group(1) for m in MEMBER_DECL.finditer(strip(f.read_text())))
    types = defaultdict(set)  # name -> folders declaring it (top-level types and free functions)
    members = defaultdict(set)  # name -> folders declaring a member of that name
    for f, text in texts.items():
        folder = folder_of(f)
        for depth, line in top_level_lines(text):
            if depth == 0:
                for m in TYPE_DECL.finditer(line):
                    types[m.group(1)].add(folder)
                for m in FUNC_DECL.finditer(line):
                    types[m.group(1)].add(folder)
            else:
                # A nested type is reached through its outer one (`PushDeviceRegistry.Target`), or as a member.
                for m in TYPE_DECL.finditer(line):
                    members[m.group(1)].add(folder)
                for m in MEMBER_DECL.finditer(line):
                    members[m.group(1)].add(folder)
    refs = defaultdict(lambda: defaultdict(set))  # (from, to) -> file -> names
    for f, text in texts.items():
        here = folder_of(f)
        for m in IDENT.finditer(text):
            dot, name = m.group(1), m.group(2)
            owners = types.get(name)
            if owners and here not in owners and len(owners) == 1:
                (there,) = owners
                refs[(here, there)][f.name].add(name)
            elif dot and name in members and len(members[name]) == 1 and name not in COMMON \
                    and name not in elsewhere:
                (there,) = members[name]
                if there != here and not owners:
                    refs[(here, there)][f.name].add("." + name)
    folders = sorted({folder_of(f) for f in files})
    print(f"floor-plan: {len(files)} files in {len(folders)} folders of {ROOT}")
    for a in folders:
        targets = sorted(b for (x, b) in refs if x == a)
        print(f"  {a} -> {', '.join(targets) if targets else '(nothing)'}")
    failed = 0
    for a, b in sorted(refs):
        if a < b and (b, a) in refs:
            failed += 1
            print(f"floor-plan: {a} and {b} refer to each other:", file=sys.stderr)
            for x, y in ((a, b), (b, a)):
                for name, used in sorted(refs[(x, y)].items()):
                    print(f"    {x}/{name} -> {y}: {', '.join(sorted(used))}", file=sys.stderr)
    # Longer cycles too (A → B → C → A): the folders must have an order, bottom to top.
    graph = defaultdict(set)
    for a, b in refs:
        graph[a].add(b)
    state, stack, cycles = {}, [], []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for folder in folders:
        if folder not in state:
            visit(folder)
    for cycle in cycles:
        if len(cycle) > 3:
            failed += 1
            print(f"floor-plan: the folders refer round in a cycle: {' -> '.join(cycle)}", file=sys.stderr)
    if failed:
        print(f"floor-plan: {failed} cycle(s); each folder must point one way", file=sys.stderr)
        return 1
    order = []
    placed = set()
    while len(placed) < len(folders):
        ready = sorted(f for f in folders if f not in placed and graph[f] - {f} <= placed)
        order += ready
        placed.update(ready)
    print("floor-plan: one way, bottom to top: " + " < ".join(order))
    return 0


if __name__ == "__main__":
    sys.exit(main())
