"""The code the README and the docs show is code a real API accepts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MODEL_RE = re.compile(r"\bclaude-[a-z]+-[\w.-]*\d\b")


def python_blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.DOTALL)


def anthropic_calls() -> list[tuple[str, str]]:
    """Every ``client.messages.create(...)`` call in a page's Python blocks."""
    found = []
    for page in PAGES:
        for block in python_blocks(page):
            for match in re.finditer(r"client\.messages\.create\(", block):
                depth, end = 1, match.end()
                while depth:
                    depth += {"(": 1, ")": -1}.get(block[end], 0)
                    end += 1
                found.append((page.name, block[match.start() : end]))
    return found


def test_the_docs_show_anthropic_calls() -> None:
    assert len(anthropic_calls()) >= 4


@pytest.mark.parametrize(("page", "call"), anthropic_calls())
def test_every_anthropic_call_passes_the_system_prompt_apart(page: str, call: str) -> None:
    """The Messages API refuses a system message in ``messages``: the history the
    compactor manages is sent only with its system messages filtered out."""
    assert "system=" in call, f"{page}: {call}"
    assert "messages=messages" not in call.replace(" ", ""), f"{page}: {call}"


def test_the_readme_names_the_model_id_the_examples_use() -> None:
    readme = set(MODEL_RE.findall((ROOT / "README.md").read_text(encoding="utf-8")))
    examples = set(MODEL_RE.findall((ROOT / "examples" / "anthropic_loop.py").read_text()))
    assert len(examples) == 1
    assert readme == examples
