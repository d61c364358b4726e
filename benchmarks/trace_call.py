"""Which modules one compactor call passes through, and how often it comes back.

Run ``python benchmarks/trace_call.py``. A compactor is called on the history of
``bench_estimate.py`` (see ``_history.py``) until its state is steady, then a
turn is appended (an assistant tool call and a large result, so micro-compaction
truncates one) and one call is traced with :func:`sys.setprofile`. Printed: the
package modules entered, the number of stops (each time the call moves from one
module to another), and the returns to a module already left. With
``--full``, the traced call is a forced full compaction instead.
"""

from __future__ import annotations

import argparse
import collections
import sys
from types import FrameType
from typing import Any

import _history
from bareagent_compact import Compactor

PACKAGE = "bareagent_compact"


def _module(frame: FrameType) -> str | None:
    name = frame.f_globals.get("__name__", "")
    return name if isinstance(name, str) and name.startswith(PACKAGE) else None


def trace(call: Any) -> tuple[list[str], collections.Counter[str]]:
    """The package modules ``call()`` moves through, in order (consecutive repeats
    folded), and how often each was entered."""
    path: list[str] = []

    def profile(frame: FrameType, event: str, _arg: object) -> None:
        if event not in ("call", "return"):
            return
        target = frame if event == "call" else frame.f_back
        module = _module(target) if target is not None else None
        if module is not None and (not path or path[-1] != module):
            path.append(module)

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return path, collections.Counter(path)


def _turn(index: int) -> list[dict[str, Any]]:
    call_id = f"trace-{index}"
    return [
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": call_id, "name": "read_file", "input": {"path": "a.py"}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": call_id, "content": "x = 1\n" * 400},
        ]},
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="trace a forced full compaction")
    args = parser.parse_args()
    messages = _history.build_history()
    compactor = Compactor(lambda prompt: "summary of the work so far " * 20)
    for index in range(3):
        compactor(messages)
        messages.extend(_turn(index))
    compactor(messages)
    messages.extend(_turn(99))
    size = len(messages)
    path, entered = trace(lambda: compactor(messages, force=args.full))
    stops = len(path) - 1
    returns = stops + 1 - len(entered)
    kind = "forced full compaction" if args.full else "turn with one new result"
    print(f"one call ({kind}) on {size} messages")
    print(f"modules entered: {len(entered)}; stops: {stops}; returns to a module left: {returns}")
    for module, count in entered.most_common():
        print(f"  {count:4d}  {module}")


if __name__ == "__main__":
    main()
