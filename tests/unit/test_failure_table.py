"""The failure table of docs/cluster.md ("What each loss costs") names, row by row, the test that
loses that part: each named test must exist, so the table cannot promise what no test checks."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def table_rows() -> list[str]:
    page = (ROOT / "docs" / "cluster.md").read_text()
    section = page.split("**What each loss costs**", 1)[1].split("\n\n", 2)[1]
    return [line for line in section.splitlines() if line.startswith("| ") and "`test_" in line]


def test_every_row_of_the_failure_table_names_a_test_that_exists():
    defined = {
        match
        for path in (ROOT / "tests").rglob("test_*.py")
        for match in re.findall(r"^def (test_\w+)\(", path.read_text(), flags=re.MULTILINE)
    }
    rows = table_rows()
    assert len(rows) >= 14, rows
    named = [re.findall(r"`(test_\w+)`", row)[-1] for row in rows]
    assert [name for name in named if name not in defined] == []
