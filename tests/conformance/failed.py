"""Print the conformance checks that did not pass, outside the baseline.

    python3 tests/conformance/failed.py <results dir of one revision> <expected-failures.yaml>

run.sh calls it when a revision fails, so that CI's log says which check of
which scenario failed and why (the suite's own output names only the
scenario). A scenario the baseline lists is left out; so are the checks
the suite does not score (SKIPPED, INFO).
"""

import json
import pathlib
import re
import sys

SCORED = {"FAILURE", "WARNING"}


def baseline(path):
    """The scenario names (and scenario:check entries) listed in the file."""
    names = set()
    for line in pathlib.Path(path).read_text().splitlines():
        m = re.match(r"^\s*-\s*([^\s#]+)", line)
        if m:
            names.add(m.group(1))
    return names


def scenario_of(directory):
    """`server-<scenario>-<ISO time>` -> `<scenario>`."""
    m = re.match(r"^server-(.+)-\d{4}-\d\d-\d\dT[\d-]+Z$", directory.name)
    return m.group(1) if m else directory.name


def main(results, expected):
    listed = baseline(expected)
    shown = 0
    for checks in sorted(pathlib.Path(results).glob("*/checks.json")):
        scenario = scenario_of(checks.parent)
        if scenario in listed:
            continue
        for check in json.loads(checks.read_text()):
            if check.get("status") not in SCORED or f"{scenario}:{check.get('id')}" in listed:
                continue
            shown += 1
            message = (check.get("errorMessage") or "")[:500]
            print(f"conformance: {scenario}: {check.get('id')} {check['status']}: {message}")
            details = json.dumps(check.get("details"), separators=(",", ":"))
            if details not in ("null", "{}"):
                print(f"    details: {details[:600]}")
    if not shown:
        print("conformance: no failed check in the results (the suite itself failed?)")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
