"""What the message dialects and SDK objects cost per turn.

Run ``python benchmarks/bench_dialects.py``. The history is the one of
``bench_turn.py`` (Anthropic dicts, see ``_history.py``), also converted to
OpenAI Chat and Responses form with the converters of the dialect property
tests, and rebuilt from SDK objects: Anthropic ``TextBlock``/``ToolUseBlock``
objects in each assistant message (the real ``anthropic`` classes when that
package is installed, else a stand-in with the same ``model_dump``).

Figures printed, each as a ratio to ``json.dumps`` of the same plain list,
medians of per-run ratios:
- the steady-state (no-op) call per dialect;
- the first call (truncates every old result) per dialect;
- the first call over the history full of SDK objects, which also converts them.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path
from typing import Any

import _history
from bareagent_compact import Compactor
from bareagent_compact.result import Action

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from converters import to_chat, to_responses

THRESHOLD = 50_000
Messages = list[dict[str, Any]]


def must_not_be_called(prompt: Messages) -> str:
    raise AssertionError("the provider was called on a turn below the threshold")


class _StandIn:
    """A pydantic-like object: only ``model_dump`` is read."""

    def __init__(self, fields: dict[str, Any]) -> None:
        self._fields = fields

    def model_dump(self, **_: Any) -> dict[str, Any]:
        return copy.deepcopy(self._fields)


def _block_factory() -> tuple[str, Any]:
    try:
        from anthropic.types import TextBlock, ToolUseBlock  # noqa: PLC0415 (optional)
    except ImportError:
        return "stand-in objects with model_dump", _StandIn

    def make(fields: dict[str, Any]) -> Any:
        cls = ToolUseBlock if fields["type"] == "tool_use" else TextBlock
        return cls.model_validate(fields)

    return "anthropic SDK objects", make


def with_objects(messages: Messages, make: Any) -> list[Any]:
    """``messages`` with every assistant block turned into an SDK object."""
    out: list[Any] = []
    for message in messages:
        content = message["content"]
        if message["role"] == "assistant" and isinstance(content, list):
            out.append({"role": "assistant", "content": [make(b) for b in content]})
        else:
            out.append(copy.deepcopy(message))
    return out


def settled(history: Messages) -> tuple[Compactor, Messages]:
    compactor = Compactor(must_not_be_called, threshold=THRESHOLD)
    messages = copy.deepcopy(history)
    assert compactor(messages).action in (Action.MICRO, Action.NONE)
    return compactor, messages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=25)
    repeats = parser.parse_args(argv).repeats
    base = _history.build_history()
    forms = {"anthropic": base, "chat": to_chat(base), "responses": to_responses(base)}
    print(f"Python {sys.version.split()[0]}; history: {len(base)} messages (Anthropic form)")

    print("steady-state call (no-op), ratio to json.dumps of the same list:")
    funcs: dict[str, Any] = {}
    for name, form in forms.items():
        compactor, messages = settled(form)
        funcs[f"call_{name}"] = lambda c=compactor, m=messages: c(m)
        funcs[f"json_{name}"] = lambda m=messages: json.dumps(m, ensure_ascii=False)
    times = _history.compare(funcs, repeats)
    for name in forms:
        ratio = times.ratio(f"call_{name}", f"json_{name}")
        print(_history.report_line(name, times.seconds[f"call_{name}"], ratio, "json.dumps"))

    what, make = _block_factory()
    print(f"first call (truncates every old result), ratio to json.dumps of the plain list; "
          f"SDK objects: {what}:")
    first: dict[str, Any] = {}
    for name, form in [*forms.items(), ("anthropic, SDK objects", None)]:
        copies = [
            with_objects(base, make) if form is None else copy.deepcopy(form)
            for _ in range(repeats)
        ]
        plain = base if form is None else form
        compactor = Compactor(must_not_be_called, threshold=THRESHOLD)
        samples = []
        for messages in copies:
            # One first call per fresh copy, paired with json.dumps in the same moment.
            start = time.perf_counter()
            compactor(messages)
            call = time.perf_counter() - start
            start = time.perf_counter()
            json.dumps(plain, ensure_ascii=False)
            dump = time.perf_counter() - start
            samples.append((call, call / dump))
        calls = sorted(s[0] for s in samples)
        ratios = sorted(s[1] for s in samples)
        first[name] = ratios[len(ratios) // 2]
        print(_history.report_line(name, calls[len(calls) // 2], first[name], "json.dumps"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
