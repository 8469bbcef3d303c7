"""docs/behaviour.md#configuration names every environment variable the shipped code reads, and only those.

The variables read are found where the code reads them: the accessors of the production sources (Shared/,
Functions/, Gateway/ — not runner/, the developer's tool): `environment["X"]` that is not an assignment,
`environment("X")`, `value("X")`, `integer("X", …)`, `("X", <default>)` pairs, `getenv("X")`; the image's entrypoint
(`$X` in infra/docker/Dockerfile's ENTRYPOINT); and libpq's own variables that a descriptor sets (`PG…` in the SAM
template). The documented ones are the backticked names in the first column of the tables of the section (from its
anchor to the next `##` section). Where the code has a literal numeric default, the table's default column must say it.

Prints `N passed, N failed`; exits non-zero naming each difference.
"""
import pathlib
import re
import sys

from contract_checks import check, report

ROOT = pathlib.Path(__file__).resolve().parents[2]
NAME = r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|PORT|PG[A-Z]+"



def without_comments(text):
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))


def code_variables():
    """Variable -> (file where it is read, its literal numeric default or None)."""
    found = {}
    patterns = [
        rf'environment(?:\.value)?\[\s*"({NAME})"\s*\](?!\s*=[^=])',
        rf'environment\(\s*"({NAME})"',
        rf'\bvalue\(\s*"({NAME})"',
        rf'\binteger\(\s*"({NAME})"',
        rf'\(\s*"({NAME})",\s*(?:\d|")',
        rf'getenv\(\s*"({NAME})"',
    ]
    for folder in ("Shared", "Functions", "Gateway"):
        for path in sorted((ROOT / folder).rglob("*.swift")):
            text = without_comments(path.read_text())
            for pattern in patterns:
                for match in re.finditer(pattern, text):
                    found.setdefault(match.group(1), [str(path.relative_to(ROOT)), None])
            for match in re.finditer(rf'integer\(\s*"({NAME})", default: ([\d_]+)', text):
                found[match.group(1)][1] = match.group(2).replace("_", "")
            for match in re.finditer(rf'\("({NAME})", (\d[\d_]*)\)', text):
                found[match.group(1)][1] = match.group(2).replace("_", "")
            # `environment["X"]…?? 300`: the fallback of a value read as it is, within the statement that reads it.
            for match in re.finditer(rf'environment\["({NAME})"\][^;{{}}]{{0,40}}\{{[\s\S]{{0,200}}?\?\? (\d+)\b', text):
                found[match.group(1)][1] = match.group(2)
    dockerfile = (ROOT / "infra" / "docker" / "Dockerfile").read_text()
    entrypoint = next(line for line in dockerfile.splitlines() if line.startswith("ENTRYPOINT"))
    for name in re.findall(r"\$\{?(" + NAME + r")\b", entrypoint):
        found.setdefault(name, ["infra/docker/Dockerfile", None])
    template = (ROOT / "infra" / "aws" / "template.yaml").read_text()
    for name in re.findall(r"^\s+(PG[A-Z]+):", template, re.M):
        found.setdefault(name, ["libpq (set by infra/aws/template.yaml)", None])
    # Written for a child (the gateway sets a warm worker's), never read by the code itself: not configuration.
    for written in ("AWS_LAMBDA_FUNCTION_NAME", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE"):
        if written in found and not any(
                re.search(rf'environment\["{written}"\](?!\s*=[^=])', without_comments(p.read_text()))
                for folder in ("Shared", "Functions") for p in (ROOT / folder).rglob("*.swift")):
            del found[written]
    return {name: tuple(value) for name, value in found.items()}


def documented_variables():
    """Variable -> its row's default cell, from the tables of behaviour.md#configuration."""
    text = (ROOT / "docs" / "behaviour.md").read_text()
    start = text.index('<a id="configuration"></a>')
    end = text.index("\n## ", text.index("## Configuration", start) + 3)
    rows = {}
    for line in text[start:end].splitlines():
        if not line.startswith("| `"):
            continue
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        for name in re.findall(r"`(" + NAME + r")`", cells[0]):
            rows[name] = cells[-1]
    return rows


def main():
    code = code_variables()
    documented = documented_variables()
    check(len(code) >= 30, f"found only {len(code)} variables read by the code: the accessor patterns are stale")
    for name in sorted(code):
        where, default = code[name]
        check(name in documented, f"{name} (read in {where}) is not in docs/behaviour.md#configuration")
        if name in documented and default is not None:
            check(re.search(rf"\b{default}\b", documented[name].replace(",", "").replace("_", "")),
                  f"{name}: behaviour.md#configuration's default {documented[name]!r} is not the code's {default}")
    for name in sorted(set(documented) - set(code)):
        check(False, f"docs/behaviour.md#configuration names {name}, which the code does not read")
    return report("configuration")


if __name__ == "__main__":
    sys.exit(main())
