"""The public surface: `__all__` lists exactly what the package exports."""

from __future__ import annotations

from importlib.resources import files
from types import ModuleType

import bareagent_compact


def test_all_lists_exactly_the_public_names() -> None:
    exported = {
        name
        for name, value in vars(bareagent_compact).items()
        if (not name.startswith("__") or name == "__version__")
        and not isinstance(value, ModuleType)
    }
    assert set(bareagent_compact.__all__) == exported
    assert bareagent_compact.__all__ == sorted(bareagent_compact.__all__)


def test_spec_names_are_importable() -> None:
    for name in ("Compactor", "_micro_compact", "_serialize", "estimate_tokens"):
        assert name in bareagent_compact.__all__
        assert callable(getattr(bareagent_compact, name))


def test_package_ships_py_typed() -> None:
    assert files("bareagent_compact").joinpath("py.typed").is_file()
