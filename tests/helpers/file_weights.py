"""The seconds each test file took in a JUnit XML report, written as ``tests/file_weights.json``.

    python -m tests.helpers.file_weights REPORT.xml   # from `pytest --junitxml=REPORT.xml ...`

The conftest hands the files to the pytest-xdist workers heaviest first (longest-processing-
time-first scheduling: the last file to start is a short one, so no worker runs alone at the
end). The weights decide only that order, never what runs; a file missing from the table is
weighed by its number of tests (:data:`UNKNOWN_S_PER_TEST` each).
"""

from __future__ import annotations

import collections
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

WEIGHTS = Path(__file__).resolve().parents[1] / "file_weights.json"
#: seconds per test of a file the table does not know (the suite's mean is ~2.4 s)
UNKNOWN_S_PER_TEST = 3.0


def weights_from_junit(report: Path) -> dict[str, float]:
    """``{"tests/unit/test_x.py": seconds}`` summed over the report's test cases (call + fixtures)."""
    sums: dict[str, float] = collections.Counter()
    for case in ET.parse(report).iter("testcase"):
        module = case.get("classname") or ""
        path = "/".join(part for part in module.split(".") if part[:1].islower() or part.startswith("test"))
        sums[f"{path}.py"] += float(case.get("time") or 0.0)
    return {name: round(s, 1) for name, s in sorted(sums.items(), key=lambda kv: -kv[1])}


def load_weights() -> dict[str, float]:
    """The committed table (empty when missing or unreadable: the order is then by test count)."""
    try:
        return {str(k): float(v) for k, v in json.loads(WEIGHTS.read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return {}


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m tests.helpers.file_weights REPORT.xml")
    WEIGHTS.write_text(json.dumps(weights_from_junit(Path(sys.argv[1])), indent=1) + "\n")
    print(f"wrote {WEIGHTS}")
