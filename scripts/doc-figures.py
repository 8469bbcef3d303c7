#!/usr/bin/env python3
"""Measured figures quoted in README.md and docs/*.md, generated from the files that record them.

A figure quoted outside the file that records it (a benchmark's milliseconds, a size, the date of a run) sits
between markers that this script rewrites:

    <!-- figure: NAME -->…generated text…<!-- /figure -->

NAME is one of FIGURES below: the source file, how its values are read (a precise pattern; a pattern that no
longer matches fails loudly, naming the source and what was looked for), and the text they make.

    scripts/doc-figures.py --write   rewrites every block from its source (scripts/bench.sh and scripts/bench-dev.sh
                                     run this after they write docs/benchmarks.md and docs/benchmarks-dev.md)
    scripts/doc-figures.py --check   exits 1 when a block differs from what its source says, naming the document,
                                     the block and the difference; also when a block's markers are missing or name
                                     no known figure (make test runs this)

Python's standard library only.
"""
import difflib
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"<!-- figure: ([a-z0-9-]+) -->(.*?)<!-- /figure -->", re.S)
NUMBER = r"[0-9]+(?:\.[0-9]+)?"


class SourceError(Exception):
    pass


def read(path):
    return (ROOT / path).read_text(encoding="utf-8")


def find(source, text, pattern, what, flags=re.M):
    """The first match of PATTERN in TEXT (from SOURCE), or a SourceError naming WHAT was looked for."""
    match = re.search(pattern, text, flags)
    if not match:
        raise SourceError(f"{source}: {what} not found (pattern {pattern!r}): has the file's shape changed? "
                          f"Update scripts/doc-figures.py with it")
    return match


def section(source, text, start, end=None):
    """The text of SOURCE from START to the next END (to the end of the file when END is None)."""
    begin = text.find(start)
    if begin < 0:
        raise SourceError(f"{source}: {start!r} not found: has the file's shape changed?")
    if end is None:
        return text[begin:]
    stop = text.find(end, begin + len(start))
    if stop < 0:
        raise SourceError(f"{source}: {end!r} not found after {start!r}: has the file's shape changed?")
    return text[begin:stop]


# --- docs/benchmarks-dev.md (scripts/bench-dev.sh) ---------------------------------------------------------------

DEV = "docs/benchmarks-dev.md"


def edit_loop():
    text = read(DEV)
    run = find(DEV, text, r"on (\d{4}-\d{2}-\d{2}), (\d+) cores, debug build", "the run's date and cores")
    rows = {}
    for kind in ("endpoint", "shared"):
        row = find(DEV, text, rf"^\| {kind} file `[^`]+` \| [^|]+ \| ({NUMBER}) \(({NUMBER}(?: {NUMBER})*)\) \|$",
                   f"the {kind} file's row (median and samples)")
        rows[kind] = (row.group(1), row.group(2).split())
    step = lambda label, what: find(DEV, text, rf"^\| {label}[^|]* \| ({NUMBER}) \|$", what).group(1)
    others = find(DEV, text, rf"^\| the other (\w+) functions, one `swift build --product` each \| ({NUMBER}) \|$",
                  "the other functions' row")
    return {
        "date": run.group(1), "cores": run.group(2),
        "endpoint": rows["endpoint"][0], "shared": rows["shared"][0], "first": rows["endpoint"][1][0],
        "module": step(r"`swift build --target CaregiverPush` \(the module's incremental compile\)", "the module's row"),
        "product": step(r"`swift build --product push-register` \(its link, and SwiftPM's planning\)",
                        "push-register's build row"),
        "others": others.group(1), "rest": others.group(2),
        "noop": step(r"`swift build --product push-register` with nothing to do \(planning alone\)",
                     "the planning-alone row"),
    }


def readme_edit_loop():
    v = edit_loop()
    return (f"{v['endpoint']} s after the save for an endpoint file and {v['shared']} s for a shared one\n"
            f"  (medians on {v['date']}: [benchmarks-dev.md](docs/benchmarks-dev.md))")


def development_edit_loop():
    v = edit_loop()
    words = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9}
    if v["others"] not in words:
        raise SourceError(f"{DEV}: 'the other {v['others']} functions' is not a count this script knows")
    each = float(v["rest"]) / words[v["others"]]
    text = (f"On the {v['cores']}-core machine ({v['date']}): a median of {v['endpoint']} s for an endpoint file and "
            f"{v['shared']} s for a shared\nfile; the first edit after `runner dev` starts is the build graph's first "
            f"use ({v['first']} s). By hand, a shared edit's\nsteps took: the one module's incremental compile "
            f"(`CaregiverPush`) {v['module']} s, push-register's build step {v['product']} s,\nand the other "
            f"{v['others']} functions' {v['rest']} s together (about {each:.1f} s each), of which {v['noop']} s per "
            f"`swift build --product` is\nSwiftPM's planning alone.")
    if float(v["module"]) + float(v["product"]) > float(v["shared"]):
        text += (" (The by-hand steps take longer than the watcher's whole edit → response, compile\nincluded: they "
                 "run right after another edit of the same file, on a machine busy with the bench's other work.)")
    return text


# --- docs/development.md's own record of `make dev` ----------------------------------------------------------------

def readme_make_dev_time():
    source = "docs/development.md"
    match = find(source, read(source),
                 rf"\*\*How long\.\*\* Measured (\d{{4}}-\d{{2}}-\d{{2}}) on .*?: ({NUMBER}) s from\s+`make dev` in the "
                 rf"fresh clone .*?\), ({NUMBER}) s for the next `make dev`", "the 'How long' paragraph", re.S)
    return (f"How long, measured on {match.group(1)}\n  ([development.md](docs/development.md#the-dev-stack-make-dev)): "
            f"{match.group(2)} s in a fresh clone (the first build), {match.group(3)} s\n  after that")


# --- docs/benchmarks.md (scripts/bench.sh) -----------------------------------------------------------------------

BENCH = "docs/benchmarks.md"


def bench_date(text):
    match = find(BENCH, text, r"^Generated at (\d{4}-\d{2}-\d{2})T(\d{2}:\d{2})", "'Generated at'")
    return f"{match.group(1)}T{match.group(2)}Z"


def deploy_zip_sizes():
    text = read(BENCH)
    table = section(BENCH, text, "**Sizes of what ships**", "### Where the time goes")
    rows = {m.group(1): tuple(float(x) for x in m.group(2, 3, 4))
            for m in re.finditer(rf"^\| ([a-z-]+) \| ({NUMBER}) \| ({NUMBER}) \| ({NUMBER}) \|$", table, re.M)}
    if "push-register" not in rows:
        raise SourceError(f"{BENCH}: no push-register row under 'Sizes of what ships'")
    bootstrap, unzipped, zipped = rows["push-register"]
    zips = sorted(row[2] for row in rows.values())
    every = ("the same for every function" if zips[-1] - zips[0] < 0.25
             else f"from {zips[0]:.1f} to {zips[-1]:.1f} MB zipped across the functions")
    return (f"each zip was {zipped:.1f} MB ({bench_date(text)};\n[benchmarks.md](benchmarks.md#start-up-against-c), "
            f"\"Sizes of what ships\"): {unzipped:.1f} MB unzipped, a {bootstrap:.1f} MB `bootstrap` and "
            f"{unzipped - bootstrap:.1f} MB of\nlibraries, and {every}")


def deploy_levers():
    text = read(BENCH)
    table = section(BENCH, text, "**Cold-start levers, each alone**", "What ships from these")
    rows = {}
    for m in re.finditer(rf"^\| ([a-z-]+) \| [^|]+ \| ({NUMBER}) \| ({NUMBER}) \| ({NUMBER}) \| ([^|]*) \| "
                         rf"({NUMBER}) \| ({NUMBER}) \| [^|]* \|$", table, re.M):
        rows[m.group(1)] = {"ratio": m.group(4), "instructions": m.group(5).strip(), "variant": m.group(6),
                            "shipped": m.group(7)}
    if "unstripped" not in rows:
        raise SourceError(f"{BENCH}: no 'unstripped' row in the cold-start levers' table")
    u = rows["unstripped"]
    counted = lambda row: re.sub(rf"^([+-]\d+) \(({NUMBER}) ×\)$", r"\1 instructions, \2 ×", row["instructions"])
    text_ = (f"In the last run ({bench_date(text)}) stripping shrank the file from {u['variant']} MB to "
             f"{u['shipped']} MB. Each lever's cold start against the shipped bootstrap's (time; instructions, "
             f"variant − shipped): ")
    text_ += "; ".join(f"`{name}` {row['ratio']} × ({counted(row)})" for name, row in rows.items()) + "."
    missing = [name for name in ("function-sections", "lld", "relr") if name not in rows]
    if missing:
        text_ += (" Not built in that run: " + ", ".join(f"`{name}`" for name in missing)
                  + " (`BENCH_LEVERS` picks\nthe levers that need a build of their own).")
    return text_


def warm_database_work(text):
    table = section(BENCH, text, "**A warm invocation's database work**", "**The same registration on a new")
    row = lambda label: float(find(BENCH, table, rf"^\| statements one by one: \+ {label}[^|]* \| ({NUMBER}) \|",
                                   f"the row '+ {label}'").group(1))
    return {"locks": row("the token's advisory lock"), "hand-over": row("the hand-over's update"),
            "cap": row("the cap's update"), "clean-up": row("the disabled rows' clean-up")}


def decisions_register_warm():
    v = warm_database_work(read(BENCH))
    steps = {"the hand-over's update": v["hand-over"] - v["locks"], "the cap's update (its ordered sub-select)":
             v["cap"] - v["hand-over"], "the disabled rows' clean-up": v["clean-up"] - v["cap"]}
    largest = max(steps, key=steps.get)
    return (f"about {v['clean-up'] / v['locks']:.1f} times the two locks\n  and the upsert alone "
            f"({v['clean-up']:.2f} against {v['locks']:.2f} ms), and {largest} was the largest part")


def decisions_register_new_connection():
    match = find(BENCH, read(BENCH), rf"one\s+`register_push_device` call ({NUMBER}) ms, the statements sent one by "
                 rf"one ({NUMBER}) ms \(\+({NUMBER}) ms for the call", "'The same registration on a new connection'")
    return (f"{match.group(3)} ms more than the statements one by one on a\n  new connection in the last "
            f"`make bench`")


def deploy_pgbouncer():
    text = read(BENCH)
    part = section(BENCH, text, "## Behind PgBouncer")
    if "\n## " in part:
        part = part[: part.index("\n## ")]
    pool = find(BENCH, part, r"`default_pool_size = (\d+)`", "the pool size").group(1)
    median_of = find(BENCH, part, r"median of (\d+) per path", "the cold runs' count").group(1)
    burst = find(BENCH, part, r"\*\*(\d+) concurrent cold invocations\*\*", "the burst's size").group(1)
    connections = find(BENCH, part, r"`max_connections = (\d+)`", "max_connections").group(1)
    cold = {label: find(BENCH, part, rf"^\| {label} \| ({NUMBER}) \| ({NUMBER}) \|$", f"the cold row '{label}'")
            for label in ("direct to PostgreSQL", "through PgBouncer")}
    many = {label: find(BENCH, part, rf"^\| {label} \| ({NUMBER}) \| ({NUMBER}) \| ({NUMBER}) \| (\d+) \| (\d+) \|$",
                        f"the burst row '{label}'") for label in ("direct to PostgreSQL", "through PgBouncer")}
    ratio = find(BENCH, part, rf"^\| \*\*PgBouncer ÷ direct\*\* \| \*\*({NUMBER})\*\* \| \*\*({NUMBER})\*\* \|",
                 "the burst's ratio row")
    direct, pooled = many["direct to PostgreSQL"], many["through PgBouncer"]
    cold_ratio = float(cold["through PgBouncer"].group(2))
    lines = [
        "",
        f"The other rows are [benchmarks.md](benchmarks.md#behind-pgbouncer-transaction-pooling)'s \"Behind "
        f"PgBouncer\", generated by `make bench` at {bench_date(text)} (one run, on a shared machine; ratios move "
        f"by about ±0.1 between runs):",
        "",
        "| | through PgBouncer | directly |",
        "|---|---|---|",
        "| 200 cold invocations at once, `max_connections = 20` (test; pool of 8) | 200 × 200; 200 doses stored, "
        "each pushed exactly once | some × 200, the rest × 503 with `Retry-After` (the test prints the split, which "
        "varies by run); every process exited 0; the answered doses stored and pushed once, none of the refused "
        "stored |",
        f"| cold `push-register`, median of {median_of} (bench; pool of {pool}) | "
        f"{cold['through PgBouncer'].group(1)} ms, **{cold['through PgBouncer'].group(2)} ×** direct | "
        f"{cold['direct to PostgreSQL'].group(1)} ms |",
        f"| {burst} cold `dose-record`s at once, median / p99 (bench; pool of {pool}, `max_connections = "
        f"{connections}`) | {float(pooled.group(1)):.0f} / {float(pooled.group(2)):.0f} ms, **{ratio.group(1)} × / "
        f"{ratio.group(2)} ×** direct; at most {pooled.group(5)} server connections | {float(direct.group(1)):.0f} / "
        f"{float(direct.group(2)):.0f} ms; up to {direct.group(5)} server connections |",
        "",
    ]
    if cold_ratio < 1:
        lines.append("In that run the pooler more than paid for its extra hop: a cold process connecting to "
                     "PgBouncer skips PostgreSQL's backend start-up (a fork, authentication, cold catalog caches), "
                     "which costs more than the added round trips.")
    else:
        lines.append("In that run the pooler's extra hop cost a cold process more than PostgreSQL's backend "
                     "start-up (a fork, authentication, cold catalog caches), which it skips.")
    shorter = float(ratio.group(1)) < 1 and float(ratio.group(2)) < 1
    lines[-1] += (f" Under a burst {'both the median and the tail shortened' if shorter else 'the latencies moved as the table says'} "
                  f"while the database served {pooled.group(5)} connections instead of {direct.group(5)}.")
    return "\n".join(lines) + "\n"


# --- docs/benchmarks-edge.md (by hand, from scripts/bench-edge.sh) ---------------------------------------------------

def behaviour_edge_rss():
    source = "docs/benchmarks-edge.md"
    text = read(source)
    row = lambda label: find(source, text, rf"^\| {label} \| ({NUMBER}) MiB \| ({NUMBER}) MiB \| ({NUMBER}) MiB \|",
                             f"the memory row '{label}'")
    before, now = row(r"before the body limit \([^|]*\)"), row(r"after \([^|]*\)")
    return (f"{float(now.group(2)) - float(now.group(1)):.1f} MiB\n  ([benchmarks-edge.md](benchmarks-edge.md); "
            f"before the limit it was +{float(before.group(2)) - float(before.group(1)):.0f} MiB)")


# --- scripts/test.sh -----------------------------------------------------------------------------------------------

def hardening_pooled_suites():
    source = "scripts/test.sh"
    suites = find(source, read(source), r"^POOLED_SUITES='([^']+)'$", "POOLED_SUITES").group(1)
    return f"`--filter\n  '{suites}'`"


FIGURES = {
    "readme-edit-loop": ("README.md", DEV, readme_edit_loop),
    "readme-make-dev-time": ("README.md", "docs/development.md", readme_make_dev_time),
    "development-edit-loop": ("docs/development.md", DEV, development_edit_loop),
    "deploy-zip-sizes": ("docs/deploy.md", BENCH, deploy_zip_sizes),
    "deploy-levers": ("docs/deploy.md", BENCH, deploy_levers),
    "deploy-pgbouncer": ("docs/deploy.md", BENCH, deploy_pgbouncer),
    "decisions-register-warm": ("docs/decisions.md", BENCH, decisions_register_warm),
    "decisions-register-new-connection": ("docs/decisions.md", BENCH, decisions_register_new_connection),
    "behaviour-edge-rss": ("docs/behaviour.md", "docs/benchmarks-edge.md", behaviour_edge_rss),
    "hardening-pooled-suites": ("docs/hardening.md", "scripts/test.sh", hardening_pooled_suites),
}


def documents():
    return ["README.md"] + sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))


def main():
    mode = sys.argv[1:]
    if mode not in (["--write"], ["--check"]):
        sys.exit(__doc__)
    write = mode == ["--write"]
    problems, seen = [], {}
    for document in documents():
        text = read(document)
        def render(match):
            name, found = match.group(1), match.group(2)
            seen.setdefault(name, []).append(document)
            if name not in FIGURES:
                problems.append(f"{document}: block '{name}' names no figure scripts/doc-figures.py knows")
                return match.group(0)
            home, source, make = FIGURES[name]
            if home != document:
                problems.append(f"{document}: block '{name}' belongs in {home} (its links are relative to it)")
                return match.group(0)
            try:
                expected = make()
            except SourceError as error:
                problems.append(f"{document}: block '{name}': {error}")
                return match.group(0)
            if not expected.startswith("\n"):
                # Inline in a paragraph: one line, wherever the paragraph's own lines break.
                expected = re.sub(r"\s*\n\s*", " ", expected)
            # A line that starts with `<!--` opens an HTML block in Markdown, which ends with that line: a marker at
            # the start of a line must stand alone on it, or the text after it shows as raw HTML.
            line_start = match.start() == 0 or text[:match.start()].rstrip(" ").endswith("\n")
            if line_start and not expected.startswith("\n"):
                problems.append(f"{document}: block '{name}' opens a line: its text would render as raw HTML "
                                f"(put the marker after some text, or make the block start with a new line)")
                return match.group(0)
            if found != expected and not write:
                diff = "\n".join(difflib.unified_diff(found.splitlines(), expected.splitlines(),
                                                      f"{document} (block '{name}')", f"from {source}", lineterm=""))
                problems.append(f"{document}: block '{name}' differs from what {source} says "
                                f"(run scripts/doc-figures.py --write):\n{diff}")
            return f"<!-- figure: {name} -->{expected}<!-- /figure -->"
        generated = BLOCK.sub(render, text)
        # A marker without its other half (inline code, where a document names the markers, aside).
        blocks = len(BLOCK.findall(text))
        prose = re.sub(r"`[^`\n]*`", "", text)
        for marker in ("<!-- figure:", "<!-- /figure -->"):
            if prose.count(marker) != blocks:
                problems.append(f"{document}: {prose.count(marker)} '{marker}' markers for {blocks} whole blocks: "
                                f"a block lost its other marker")
        if write and generated != text:
            (ROOT / document).write_text(generated, encoding="utf-8")
            print(f"doc-figures: rewrote {document}")
    for name, (home, source, _) in FIGURES.items():
        if name not in seen:
            problems.append(f"{home}: block '{name}' (from {source}) is missing: its markers "
                            f"<!-- figure: {name} --> … <!-- /figure --> are gone")
        elif len(seen[name]) > 1:
            problems.append(f"{home}: block '{name}' appears {len(seen[name])} times")
    if problems:
        sys.exit("doc-figures: " + "\n\ndoc-figures: ".join(problems))
    if not write:
        print(f"doc-figures: {len(FIGURES)} blocks match their sources")


if __name__ == "__main__":
    main()
