"""How many paths, URLs and error lines survive a compaction, with and without
``pin_facts=True``.

Run ``python benchmarks/bench_facts.py``. Each session is replayed turn by turn
through a ``Compactor`` with the offline summariser (threshold 30,000); at every
full compaction the summary source's distinct file paths, URLs and error lines
(as ``bareagent_compact.facts.extract`` finds them, after micro-compaction) are
looked up in the rebuilt history. The sessions: the demo's scripted session, the
benchmark history of ``_history.py``, and, when the measurement harness is
beside the repository (``../shared/accuracy``), its generated sessions (five
kinds, seeds 0-1). Prints the share kept and the size the pinned block added.
"""

from __future__ import annotations

import argparse
import logging
import random
import sys
from pathlib import Path
from typing import Any

import _history
from bareagent_compact import CompactionResult, Compactor, OfflineSummarizer, estimate_tokens
from bareagent_compact.cli import demo as demo_module
from bareagent_compact.dialects import is_system
from bareagent_compact.facts import PINNED_HEADING, extract
from bareagent_compact.serialize import _serialize

THRESHOLD = 30_000
HARNESS = Path(__file__).resolve().parents[2] / "shared" / "accuracy"


def demo_turns() -> list[list[dict[str, Any]]]:
    """The demo's scripted session as a list of turns (messages added per turn)."""
    rng = random.Random(7)
    turns: list[list[dict[str, Any]]] = [[{"role": "system", "content": demo_module.SYSTEM_PROMPT}]]
    call = 0
    for task, (request, calls) in enumerate(demo_module._script(rng)):
        pending: list[dict[str, Any]] = [{"role": "user", "content": request}]
        for name, tool_input, output in calls:
            call += 1
            use = {"type": "tool_use", "id": f"toolu_{call:03d}", "name": name, "input": tool_input}
            result = {"type": "tool_result", "tool_use_id": use["id"], "content": output}
            turns.append([*pending, {"role": "assistant", "content": [use]}])
            pending = [{"role": "user", "content": [result]}]
        reply = {"role": "assistant", "content": demo_module._reply(task, request)}
        turns.append([*pending, reply])
    return turns


def history_turns(messages: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """A flat history cut into turns: each turn ends before an assistant message."""
    turns: list[list[dict[str, Any]]] = [[]]
    for message in messages:
        if message["role"] == "assistant":
            turns.append([])
        turns[-1].append(message)
    return turns


def harness_sessions() -> dict[str, list[list[dict[str, Any]]]]:
    if not (HARNESS / "sessions.py").exists():
        return {}
    sys.path.insert(0, str(HARNESS))
    import sessions  # noqa: PLC0415 (the harness is optional)

    out = {}
    for kind in sessions.KINDS:
        for seed in (0, 1):
            session = sessions.make_session(kind, seed)
            turns = [list(session.start)]
            for reply, user in session.steps:
                turns.append([reply, user])
            out[f"{kind} seed {seed}"] = turns
    return out


def replay(
    turns: list[list[dict[str, Any]]], pin: bool, force_at_end: bool, profile: bool = False
) -> tuple[int, int, int, int]:
    """(facts in the sources, facts kept, tokens the pinned blocks added, compactions)."""
    found = kept = added = fulls = 0

    def after(result: CompactionResult, summary: str | None) -> None:
        nonlocal found, kept, added, fulls
        if summary is None:
            return
        fulls += 1
        rebuilt_ids = {id(m) for m in result.rebuilt}
        source = [m for m in result.replaced if not is_system(m) and id(m) not in rebuilt_ids]
        facts = extract(source)
        wanted = {*facts.paths, *facts.urls, *facts.errors}
        text = _serialize(list(result.rebuilt))
        found += len(wanted)
        kept += sum(fact in text for fact in wanted)
        if PINNED_HEADING in summary:
            block = summary[summary.index(PINNED_HEADING) :]
            added += estimate_tokens([{"role": "user", "content": block}])

    settings: dict[str, Any] = {"profile": "agent"} if pin and profile else {"pin_facts": pin}
    compactor = Compactor(
        OfflineSummarizer(), threshold=THRESHOLD, after_compact=after, **settings
    )
    messages: list[dict[str, Any]] = []
    for turn in turns:
        messages += turn
        compactor(messages)
    if force_at_end:
        compactor(messages, force=True)
    return found, kept, added, fulls


def main(argv: list[str] | None = None) -> int:
    logging.getLogger("bareagent_compact").setLevel(logging.ERROR)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the demo session only")
    parser.add_argument(
        "--profile", action="store_true", help='"with": profile="agent" instead of pin_facts=True'
    )
    arguments = parser.parse_args(argv)
    quick, profile = arguments.quick, arguments.profile
    sessions = {"demo session": demo_turns()}
    if not quick:
        sessions["benchmark history"] = history_turns(_history.build_history())
        sessions.update(harness_sessions())
    print(f"offline summariser, threshold {THRESHOLD}; share of the summary source's distinct "
          "paths, URLs and error lines present in the rebuilt history")
    print(f"  {'session':<22} {'facts':>6} {'without':>8} {'facts':>6} {'with':>8} "
          f"{'block/compact':>13}")
    totals = [0, 0, 0, 0]
    blocks = compactions = 0
    for name, turns in sessions.items():
        # Later compactions differ once a pinned block is in a summary, so each
        # run's share is of its own sources' facts.
        found, kept_without, _, _ = replay(turns, pin=False, force_at_end=True)
        found_with, kept_with, added, fulls = replay(
            turns, pin=True, force_at_end=True, profile=profile
        )
        totals = [a + b for a, b in zip(totals, (found, kept_without, found_with, kept_with),
                                        strict=True)]
        blocks += added
        compactions += fulls
        print(f"  {name:<22} {found:>6} {kept_without / max(found, 1):>8.1%} "
              f"{found_with:>6} {kept_with / max(found_with, 1):>8.1%} "
              f"{added / max(fulls, 1):>13.0f}")
    found, without, found_with, with_pin = totals
    print(f"  {'all':<22} {found:>6} {without / max(found, 1):>8.1%} "
          f"{found_with:>6} {with_pin / max(found_with, 1):>8.1%} "
          f"{blocks / max(compactions, 1):>13.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
