"""Memory peak of a forced full compaction on a large transcript (``tracemalloc``).

The history holds about ``--mb`` megabytes of transcript text and its last
summarised message ends in whitespace, the case where ``_serialize`` strips the
end of the transcript. Two shapes: string contents (the transcript references
the caller's strings) and block lists (each message is rendered to a new
string first). The peak is reported in bytes and as a multiple of the
transcript string's own size (``sys.getsizeof``).

    python benchmarks/bench_memory.py            # 50 MB
    python benchmarks/bench_memory.py --mb 5     # quicker
"""

from __future__ import annotations

import argparse
import sys
import tracemalloc
from typing import Any

import _history  # noqa: F401  (puts the working tree's src first on sys.path)
from bareagent_compact import Compactor
from bareagent_compact.result import Action
from bareagent_compact.serialize import _serialize

LINE = "    result = compute(value, options)  # a line of ordinary source code\n"


def build(megabytes: float, blocks: bool) -> list[dict[str, Any]]:
    """About ``megabytes`` of transcript; the last summarised message ends in spaces."""
    chunk = LINE * 60  # about 4 KB
    count = max(2, int(megabytes * 1_000_000 / len(chunk)))
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are terse."}]
    for index in range(count):
        role = "user" if index % 2 == 0 else "assistant"
        if blocks:
            content: Any = [
                {"type": "text", "text": f"{index}:\n{chunk}"},
                {"type": "text", "text": "(continued)"},
            ]
        else:
            content = f"{index}:\n{chunk}"
        messages.append({"role": role, "content": content})
    last = messages[-1]
    if blocks:
        last["content"][-1]["text"] += "\n\n   \n"
    else:
        last["content"] += "\n\n   \n"
    messages.append({"role": "user", "content": "continue"})  # the pending message
    return messages


def measure(megabytes: float, blocks: bool) -> dict[str, float]:
    messages = build(megabytes, blocks)
    source = [m for m in messages[:-1] if m["role"] != "system"]
    transcript_bytes = sys.getsizeof(_serialize(source))
    compactor = Compactor(lambda prompt: "SUMMARY", threshold=10**12)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        result = compactor(messages, force=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.action is Action.FULL
    return {"transcript_bytes": transcript_bytes, "peak_bytes": peak}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--mb", type=float, default=50.0, help="transcript size in MB")
    args = parser.parse_args()
    for blocks in (False, True):
        figures = measure(args.mb, blocks)
        shape = "block lists" if blocks else "string contents"
        ratio = figures["peak_bytes"] / figures["transcript_bytes"]
        print(
            f"{shape:16s} transcript {figures['transcript_bytes'] / 1e6:7.1f} MB  "
            f"peak {figures['peak_bytes'] / 1e6:7.1f} MB  = {ratio:.2f}x the transcript"
        )


if __name__ == "__main__":
    main()
