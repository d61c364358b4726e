"""What one turn costs in the loop shapes agent frameworks have.

Run ``python benchmarks/bench_loops.py`` (``--sizes 1000,5000``, ``--turns N``,
``--json``). The session is ``_history.py``'s (Anthropic dicts), repeated to the
size asked. Every compactor has a provider that must not be called and a
threshold far above the history, so each turn is step 1 and the count. A turn
appends one assistant tool call and its result; each figure is the median, over
the turns, of the turn's thread CPU time divided by one ``json.dumps`` of the
list as sent (``ensure_ascii=False``), timed in the same turn.

Loop shapes:
- **appended**: the same list, appended to (the common loop);
- **appended, record_usage**: the same, with ``record_usage`` after each call;
- **sdk objects**: the assistant turn appended as an object with ``model_dump``
  (as SDK responses are), converted by the compactor;
- **rebuilt**: the list made anew from JSON every turn (a framework that keeps
  the history serialised between turns), then the call;
- **rebuilt, record_usage**: the same, ``record_usage`` with the new list;
- **new compactor**: a compactor built for every request (a stateless server),
  construction included;
- **new list (compacted)**: ``compacted()`` every turn, its new list the next
  turn's history (the caller's list and messages left untouched);
- **record_usage alone**: the mean cost of ``record_usage`` in the appended loop.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import _history
from bareagent_compact import Compactor, estimate_tokens

Messages = list[dict[str, Any]]


def _never(prompt: object) -> str:
    raise AssertionError("the provider must not be called")


class _Block:
    """A stand-in for an SDK content block: read through ``model_dump``."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def model_dump(self, **_: Any) -> dict[str, Any]:
        return dict(self._data)


def _turn(index: int, sdk: bool = False) -> list[Any]:
    call = f"toolu_loop_{index:05d}"
    use = {"type": "tool_use", "id": call, "name": "bash", "input": {"command": f"ls {index}"}}
    result = "\n".join(f"-rw-r--r-- 1 agent agent {k * 97} file_{index}_{k}.py" for k in range(30))
    return [
        {"role": "assistant", "content": [_Block(use) if sdk else use]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": call, "content": result},
        ]},
    ]  # fmt: skip


def _clock() -> int:
    return time.thread_time_ns()


def _dumps(messages: Messages) -> int:
    start = _clock()
    json.dumps(messages, ensure_ascii=False)
    return _clock() - start


def _usage(messages: Messages) -> int:
    return estimate_tokens(messages) + 1500


def _compactor(threshold: int) -> Compactor:
    return Compactor(_never, threshold=threshold)


def shape(name: str, history: Messages, turns: int) -> float:
    """The median ratio of one turn of ``name`` to ``json.dumps`` of the list."""
    threshold = 10 * estimate_tokens(history)
    messages = json.loads(json.dumps(history))
    compactor = _compactor(threshold)
    compactor(messages)
    ratios: list[float] = []
    for index in range(turns + 2):
        sdk = name == "sdk objects"
        if name.startswith("rebuilt"):
            messages = json.loads(json.dumps(messages, ensure_ascii=False))
        messages.extend(_turn(index, sdk))
        usage = _usage(messages) if "record_usage" in name else 0
        start = _clock()
        if name == "new compactor":
            _compactor(threshold)(messages)
        elif name == "new list (compacted)":
            messages, _ = compactor.compacted(messages)
        else:
            compactor(messages)
        if usage:
            compactor.record_usage(messages, usage)
        spent = _clock() - start
        if index >= 2:  # the first turns settle the conversion and the cache
            ratios.append(spent / max(1, _dumps(messages)))
    return statistics.median(ratios)


def record_usage_alone(history: Messages, turns: int) -> float:
    """The median cost of ``record_usage`` in the appended loop, to ``json.dumps``."""
    threshold = 10 * estimate_tokens(history)
    messages = json.loads(json.dumps(history))
    compactor = _compactor(threshold)
    ratios: list[float] = []
    for index in range(turns + 2):
        messages.extend(_turn(index))
        compactor(messages)
        usage = _usage(messages)
        start = _clock()
        compactor.record_usage(messages, usage)
        spent = _clock() - start
        if index >= 2:
            ratios.append(spent / max(1, _dumps(messages)))
    return statistics.median(ratios)


SHAPES: tuple[str, ...] = (
    "appended",
    "appended, record_usage",
    "sdk objects",
    "rebuilt",
    "rebuilt, record_usage",
    "new compactor",
    "new list (compacted)",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="1000,5000", help="history sizes in messages")
    parser.add_argument("--turns", type=int, default=15, help="timed turns per figure")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    base = _history.build_history()
    figures: dict[str, dict[str, float]] = {}
    for size in (int(part) for part in args.sizes.split(",")):
        history = _history.scaled_history(base, max(1, round(size / len(base))))
        row = {name: shape(name, history, args.turns) for name in SHAPES}
        row["record_usage alone"] = record_usage_alone(history, args.turns)
        figures[str(len(history))] = row
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    sizes = list(figures)
    print("| loop shape | " + " | ".join(f"n = {n}" for n in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    for name in (*SHAPES, "record_usage alone"):
        cells = " | ".join(f"{figures[n][name]:.2f}x" for n in sizes)
        print(f"| {name} | {cells} |")


if __name__ == "__main__":
    main()
