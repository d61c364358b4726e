"""The one-way arrows of docs/architecture.md, read from every module's imports."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import bareagent_compact

PACKAGE = Path(bareagent_compact.__file__).parent

LAYERS: dict[str, int] = {
    # vocabulary
    "protocols": 0, "prompts": 0, "result": 0, "_json": 0, "_limits": 0, "_defaults": 0,
    "images": 0,
    # the message keys
    "dialects": 1,
    # the message layer
    "split": 2, "pairs": 2, "serialize": 2, "tokens": 2, "text_weight": 2, "plain": 2,
    "validate": 2,
    # the concerns, and the stores beside them
    "options": 3, "rebuild": 3, "summarize": 3, "micro": 3, "micro_policy": 3, "trigger": 3,
    "requests": 3,
    "anchor": 3, "history": 3, "ledger": 3, "facts": 3, "instructions": 3, "offline": 3,
    "providers": 3, "usage": 3,
    "overflow": 3, "stores": 3, "recall": 3, "background": 3, "oversize": 3, "turn_results": 3,
    "thinking": 3, "check": 3, "server_summary": 3, "user_turns": 3, "identifiers": 3,
    "continuation": 3,
    # the steps, then the drivers
    "engine": 4,
    "compactor": 5, "async_compactor": 5,
    # re-exports and kept import paths, then the command line
    "__init__": 6, "transcripts": 6, "sqlstore": 6, "integrations": 6,
    "__main__": 7, "cli": 7, "replay": 7,
}  # fmt: skip


def room(module: str) -> str:
    """The layer key of a dotted module name inside the package."""
    return module.split(".", maxsplit=1)[0] if module else "__init__"


def imports(path: Path) -> set[str]:
    """The package modules ``path`` imports, relative to the package."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "bareagent_compact":
                found.update(alias.name for alias in node.names)
            elif node.module.startswith("bareagent_compact."):
                found.add(node.module.removeprefix("bareagent_compact."))
        elif isinstance(node, ast.Import):
            found.update(
                alias.name.removeprefix("bareagent_compact.")
                for alias in node.names
                if alias.name.startswith("bareagent_compact.")
            )
    return found


MODULES = sorted(
    ".".join(path.relative_to(PACKAGE).with_suffix("").parts) for path in PACKAGE.rglob("*.py")
)


def test_every_module_has_a_layer() -> None:
    assert {room(m) for m in MODULES} <= set(LAYERS)


@pytest.mark.parametrize("module", MODULES)
def test_imports_point_down_or_across_never_up(module: str) -> None:
    path = PACKAGE.joinpath(*module.split(".")).with_suffix(".py")
    layer = LAYERS[room(module.removesuffix(".__init__"))]
    upward = {m for m in imports(path) if LAYERS[room(m)] > layer}
    assert not upward, f"{module} imports a higher layer: {sorted(upward)}"


def test_the_stores_and_the_library_never_import_the_command_line() -> None:
    for module in MODULES:
        if LAYERS[room(module.removesuffix(".__init__"))] >= 6:
            continue
        path = PACKAGE.joinpath(*module.split(".")).with_suffix(".py")
        assert not {m for m in imports(path) if room(m) == "cli"}, module


def test_a_dialect_module_imports_no_other_dialect() -> None:
    names = {"anthropic", "openai_chat", "openai_responses"}
    for name in names:
        found = imports(PACKAGE / "dialects" / f"{name}.py")
        assert not {f"dialects.{other}" for other in names - {name}} & found, name


DIALECT_INTERNALS = {
    "anthropic", "openai_chat", "openai_responses", "_content", "_common", "_protocol", "server",
}  # fmt: skip
"""The modules of dialects/ that only the package itself imports."""


def _dialect_internals_used(path: Path) -> set[str]:
    """The internal dialect modules ``path`` imports or reads through ``dialects.``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith("bareagent_compact.dialects."):
                found.add(node.module.removeprefix("bareagent_compact.dialects."))
            elif node.module == "bareagent_compact.dialects":
                found.update(a.name for a in node.names if a.name in DIALECT_INTERNALS)
        elif isinstance(node, ast.Import):
            found.update(
                alias.name.removeprefix("bareagent_compact.dialects.")
                for alias in node.names
                if alias.name.startswith("bareagent_compact.dialects.")
            )
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "dialects"
            and node.attr in DIALECT_INTERNALS
        ):
            found.add(node.attr)
    return found


@pytest.mark.parametrize("module", [m for m in MODULES if room(m) != "dialects"])
def test_no_module_outside_dialects_reads_a_dialect_module(module: str) -> None:
    path = PACKAGE.joinpath(*module.split(".")).with_suffix(".py")
    used = _dialect_internals_used(path)
    assert not used, f"{module} reads dialect internals: {sorted(used)}"
