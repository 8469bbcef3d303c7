#!/usr/bin/env python3
"""Whole-run leak check: nothing the functions or the runner said during `make test` — response bodies,
stdout, stderr log lines, the contract run's responses — holds a secret or health data.

    scripts/leak-scan.py CAPTURE_DIR

Looks for, in every file under CAPTURE_DIR (HAR files: response bodies only, since requests carry tokens by design):
  * every device token and medication name in the test database (DATABASE_URL), verbatim;
  * anything shaped like a JWT, a patient session token (`pst_…`), an OAuth access token (`ya29.`: the database holds
    FCM access tokens sealed, so they are found by their shape — Google's and the emulator's both start so), or a PEM /
    service-account private key;
  * the HS256 secret the tests sign with.
Prints counts, and for each hit its kind and file (never the secret itself); exits 1 on any hit, 2 when there was
nothing to scan (a capture that silently recorded nothing must not pass).
"""
import json
import os
import pathlib
import re
import subprocess
import sys

PATTERNS = {
    "JWT": re.compile(r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]+"),
    "patient session token": re.compile(r"pst_[A-Za-z0-9_-]{43}"),
    "OAuth access token": re.compile(r"ya29\.[A-Za-z0-9_.-]{8,}"),
    "private key": re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----|\"private_key\"\s*:"),
}


def database_values():
    """(kind, value) for every secret or health datum the test run left in its database."""
    url = os.environ.get("DATABASE_URL")
    if not url:
        sys.exit("leak-scan: DATABASE_URL is not set")
    # (query, shortest value worth looking for): a few tests register toy tokens such as "tok", which would match
    # the word "token" in any message; a real FCM token is some 150 characters. The tests' medication names are
    # three characters or more.
    queries = {
        "device token": ("SELECT token FROM caregiver_push.push_devices", 16),
        "medication name": ("SELECT DISTINCT name FROM caregiver_push.medications", 3),
    }
    # The sweep's tests each run in a database of their own (`isolated_…`, kept until the throwaway cluster goes):
    # their tokens and names count too.
    listing = subprocess.run(
        ["psql", url, "-qAt", "-c", r"SELECT datname FROM pg_database WHERE datname LIKE 'isolated\_%'"],
        check=True, capture_output=True, text=True).stdout
    urls = [url] + [re.sub(r"/[^/?]*(\?|$)", lambda m: f"/{name}{m.group(1)}", url, count=1)
                    if "://" in url else f"{url} dbname={name}"
                    for name in listing.split()]
    values = []
    for database in urls:
        for kind, (sql, shortest) in queries.items():
            out = subprocess.run(["psql", database, "-qAt", "-c", sql], check=True, capture_output=True, text=True).stdout
            values += [(kind, line) for line in out.split("\n") if len(line) >= shortest]
    return values


def test_secret():
    source = pathlib.Path(__file__).resolve().parent.parent / "Tests/TestSupport/TestInvocation.swift"
    match = re.search(r'let testJWTSecret = "([^"]+)"', source.read_text())
    return [("HS256 secret", match.group(1))] if match else []


def texts(directory):
    """(where, text) for each captured output: a file, or a section of one (the tests frame each output with a
    `=== source` line); HAR files contribute their response bodies."""
    for path in sorted(pathlib.Path(directory).rglob("*")):
        if not path.is_file():
            continue
        raw = path.read_text(errors="replace")
        if path.suffix == ".har":
            entries = json.loads(raw).get("log", {}).get("entries", [])
            raw = "\n".join((e.get("response", {}).get("content", {}) or {}).get("text", "") or "" for e in entries)
            yield f"{path.name} ({len(entries)} responses)", raw
        elif "\n=== " in raw:
            for section in raw.split("\n=== ")[1:]:
                source, _, text = section.partition("\n")
                yield f"{path.name} [{source}]", text
        else:
            yield path.name, raw


def main():
    directory = sys.argv[1]
    exact = database_values() + test_secret()
    hits, scanned, files = {}, 0, set()
    for name, text in texts(directory):
        files.add(name.split(" ")[0])
        scanned += len(text)
        for kind, value in exact:
            if value in text:
                hits.setdefault((kind, name), 0)
                hits[(kind, name)] += text.count(value)
        for kind, pattern in PATTERNS.items():
            found = len(pattern.findall(text))
            if found:
                hits[(kind, name)] = hits.get((kind, name), 0) + found
    kinds = {}
    for kind, _ in exact:
        kinds[kind] = kinds.get(kind, 0) + 1
    print(
        f"leak-scan: {len(files)} capture files, {scanned / 1e6:.1f} MB; looked for "
        + ", ".join(f"{n} {k}s" for k, n in sorted(kinds.items()))
        + " and the patterns: " + ", ".join(PATTERNS)
    )
    if scanned == 0:
        print("leak-scan: nothing was captured", file=sys.stderr)
        return 2
    for (kind, name), count in sorted(hits.items()):
        print(f"leak-scan: LEAK {kind} ×{count} in {name}", file=sys.stderr)
    print(f"leak-scan: {'FAILED' if hits else 'clean'}")
    return 1 if hits else 0


if __name__ == "__main__":
    sys.exit(main())
