"""The server-compaction loops: who compacts, rejected requests, counting error.

Run ``python benchmarks/bench_server_loops.py`` from the project root, in an
environment with the integration extra (``pip install -e ".[integration]"``: the
real ``anthropic`` and ``openai`` clients, over the fake server of
``examples/_fake_server.py``). It replays the loops of
``tests/integration/test_server_compaction_loop.py`` (32 turns each, the same
code) for every mode and dialect and prints, per loop: the full compactions by
the server on its own, by the compactor through the server and by the
compactor's own summariser, the rejected requests, and the counting error
(``tokens_after`` of the call before each request against the live input the
fake server counts for it, JSON characters / 4), as the largest single error,
the mean, and the largest from the third request on.

``--exact-charges`` asks how much of the error a better split of the usage
reports could remove: every reported message is charged exactly what the fake
server counts for it (what no API reports), and only content never reported is
estimated. What remains is the estimate of content the API has not yet seen:
the turn appended since the last request, and after a compaction most of the
request.

    python benchmarks/bench_server_loops.py
    python benchmarks/bench_server_loops.py --exact-charges --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.util import find_spec
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for folder in ("src", "examples", "tests/integration"):
    sys.path.insert(0, str(ROOT / folder))

_MISSING = [name for name in ("anthropic", "openai", "pytest") if find_spec(name) is None]
if _MISSING:
    sys.exit(f"needs the integration extra (pip install -e '.[integration]'): {_MISSING}")

# The loops of the integration tests, through the real clients.
import test_server_compaction_loop as loops  # type: ignore[import-not-found]  # noqa: E402
from _fake_server import FakeServer  # type: ignore[import-not-found]  # noqa: E402

from bareagent_compact import ledger  # noqa: E402

LOOPS: list[tuple[str, str, int, tuple[int, ...], int | None]] = [
    # label, mode, threshold, forced turns, server trigger (None: the test's default)
    ("a, threshold 3000", "a", 3000, (), None),
    ("a, threshold 20000", "a", 20000, (), None),
    ("b, threshold 3000", "b", 3000, (), 0),
    ("c, threshold 3000", "c", 3000, (), None),
    ("c, trigger 2500, forced at 8 and 31", "c", 20000, (8, 31), 2500),
]


@contextmanager
def exact_charges() -> Iterator[None]:
    """Charge every reported message what the fake server counts for it: its JSON
    and the separator before it, over 4 (the split no usage report gives)."""
    record = ledger.UsageLedger.record

    def recorded(self: Any, messages: Any, input_tokens: int, copies: Any = None) -> None:
        record(self, messages, input_tokens, copies)
        charged = 0.0
        for message, entry in zip(messages, self._resolved, strict=True):
            entry.charge = (len(json.dumps(message)) + 2) / 4
            charged += entry.charge
        self._overhead = input_tokens - charged

    ledger.UsageLedger.record = recorded  # type: ignore[method-assign]
    try:
        yield
    finally:
        ledger.UsageLedger.record = record  # type: ignore[method-assign]


def measure(exact: bool) -> list[dict[str, Any]]:
    """One row per loop and dialect."""
    rows = []
    for dialect in ("anthropic", "responses"):
        for label, mode, threshold, forced, trigger in LOOPS:
            server = FakeServer()
            with exact_charges() if exact else _nothing():
                figures = loops.run(
                    server,
                    dialect,
                    threshold,
                    mode=mode,
                    force_at=forced,
                    trigger=loops.SERVER_TRIGGER if trigger is None else trigger,
                )
            trace = figures.pop("trace")
            worst = max(trace, key=lambda row: abs(row[2] - row[3]) / row[3])
            rows.append(
                {
                    "loop": label,
                    "dialect": dialect,
                    **figures,
                    "worst": {
                        "turn": worst[0],
                        "action": worst[1],
                        "count": worst[2],
                        "live": worst[3],
                    },
                }
            )
    return rows


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| loop | dialect | turns | compactions: server / library via server / library own "
        "| rejected | error max / mean / max from 3rd | worst request |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        own = row["library"] - row["on_demand"]
        worst = row["worst"]
        lines.append(
            f"| {row['loop']} | {row['dialect']} | {row['turns']} "
            f"| {row['server']} / {row['on_demand']} / {own} | {row['rejected']} "
            f"| {row['error']:.1%} / {row['mean_error']:.2%} / {row['error_from_third']:.1%} "
            f"| turn {worst['turn']} ({worst['action']}): {worst['count']} vs {worst['live']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--exact-charges",
        action="store_true",
        help="charge reported messages what the fake server counts for them",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    args = parser.parse_args()
    rows = measure(args.exact_charges)
    kind = "exact charges for reported messages" if args.exact_charges else "the library"
    print(f"server-compaction loops, counting by {kind}")
    print(table(rows))
    mean = max(row["mean_error"] for row in rows)
    later = max(row["error_from_third"] for row in rows)
    print(
        f"worst mean {mean:.2%}; worst single request {max(r['error'] for r in rows):.1%}; "
        f"worst from the third request on {later:.1%}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
