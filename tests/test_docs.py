"""The documentation's claims about tests stay true."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

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
