"""The documentation's claims about tests stay true."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from bareagent_compact import CompactionResult, Reason

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def referenced_tests() -> list[tuple[str, str, str]]:
    found = []
    for page in sorted(DOCS.glob("*.md")):
        text = page.read_text(encoding="utf-8")
        for path, name in re.findall(r"`(tests/[\w/]+\.py)::(test_\w+)`", text):
            found.append((page.name, path, name))
    return found


def test_the_docs_reference_tests() -> None:
    assert len(referenced_tests()) >= 40


@pytest.mark.parametrize(("page", "path", "name"), referenced_tests())
def test_every_test_named_in_the_docs_exists(page: str, path: str, name: str) -> None:
    source = (ROOT / path).read_text(encoding="utf-8")
    assert re.search(rf"^def {name}\(", source, re.MULTILINE), (
        f"{page} names a missing test {path}::{name}"
    )


def _table_column(page: str, header: str, column: int = 1) -> list[str]:
    """The cells of a column (the first by default) of the table whose header row
    starts with ``header`` in ``docs/page``, without their quotes."""
    lines = (DOCS / page).read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    cells = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells.append(line.split("|")[column].strip().strip('`"'))
    return cells


def test_the_reason_table_lists_every_reason_with_its_value() -> None:
    rows = dict(zip(
        _table_column("how-it-works.md", "| `Reason`"),
        _table_column("how-it-works.md", "| `Reason`", column=2),
        strict=True,
    ))
    assert rows == {member.name: member.value for member in Reason}


def test_the_result_table_lists_every_field_of_compaction_result() -> None:
    fields = [f.name for f in dataclasses.fields(CompactionResult)]
    assert sorted(_table_column("how-it-works.md", "| field | meaning |")) == sorted(fields)
