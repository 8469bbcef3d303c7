"""The contract checks' one tally: each script calls `check` for every expectation and ends with `report`.

Imported by the check_*.py scripts beside it (their folder is on sys.path when they run).
"""
import sys

failures = []
passed = 0


def check(condition, message):
    """Counts one expectation: passed, or a failure named by `message`."""
    global passed
    if condition:
        passed += 1
    else:
        failures.append(message)


def report(prefix):
    """Names each failure on stderr, prints the `N passed, N failed` line the CI reads; the exit status."""
    for message in failures:
        print(f"{prefix}: {message}", file=sys.stderr)
    print(f"{passed} passed, {len(failures)} failed")
    return 1 if failures else 0
