"""How long ``estimate_tokens`` takes, measured against ``json.dumps`` of the same messages.

Run ``python benchmarks/bench_estimate.py`` (add ``--json`` for machine-readable
output). The history is built by ``_history.py`` from the Python standard
library's own source plus embedded Chinese text, with a fixed seed. The
functions compared take turns in short runs; every time is the median of the
runs, and every ratio the median of the per-run ratios, so that they hold even
on a busy machine.

Figures printed:
- the estimate against one serialisation pass (``json.dumps(messages,
  ensure_ascii=False)``) and against the obvious three-regex implementation;
- where the time goes: ASCII strings, other strings, the walk over the
  structure, one short string;
- how the cost grows with the history (1x, 2x, 4x, 8x).
"""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any

import _history
from bareagent_compact.tokens import CJK_RANGES, estimate_tokens, text_quarters

# The obvious implementation: three findall passes per string.
_NAIVE_CJK = re.compile("[" + "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in CJK_RANGES) + "]")
_NAIVE_ALNUM = re.compile("[A-Za-z0-9]")
_NAIVE_SPACE = re.compile(r"[^\S\u3000]")  # whitespace; U+3000 is CJK


def naive_text(text: str) -> float:
    cjk = len(_NAIVE_CJK.findall(text))
    alnum = len(_NAIVE_ALNUM.findall(text))
    space = len(_NAIVE_SPACE.findall(text))
    return 1.5 * cjk + 0.25 * (alnum + space) + 0.5 * (len(text) - cjk - alnum - space)


def naive_value(value: Any) -> float:
    if isinstance(value, str):
        return naive_text(value)
    if value is None:
        return 0.0
    if isinstance(value, list):
        return sum(naive_value(item) for item in value)
    if isinstance(value, dict) and "type" in value:
        if value["type"] == "tool_use":
            tool_input = value.get("input", "")
            if not isinstance(tool_input, str):
                tool_input = json.dumps(tool_input, ensure_ascii=False, default=str)
            return naive_value(value.get("name")) + naive_text(tool_input)
        return naive_value(value.get("text")) + naive_value(value.get("content"))
    return naive_text(json.dumps(value, ensure_ascii=False, default=str))


def naive_estimate(messages: list[dict[str, Any]]) -> int:
    return math.ceil(sum(naive_value(message.get("content")) for message in messages))


def _strings(value: Any, out: list[str]) -> list[str]:
    """Every string the estimate weighs directly (tool inputs excluded)."""
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, list):
        for item in value:
            _strings(item, out)
    elif isinstance(value, dict) and value.get("type") != "tool_use":
        _strings(value.get("text"), out)
        _strings(value.get("content"), out)
    return out


def _hollow(value: Any) -> Any:
    """The same structure with every string emptied: what the walk alone costs."""
    if isinstance(value, str):
        return ""
    if isinstance(value, list):
        return [_hollow(item) for item in value]
    if isinstance(value, dict):
        return {key: _hollow(item) for key, item in value.items()}
    return value


def run(repeats: int, scales: list[int]) -> dict[str, Any]:
    messages = _history.build_history()
    results: dict[str, Any] = {"history": _history.describe(messages), "repeats": repeats}
    assert estimate_tokens(messages) == naive_estimate(messages)

    main = _history.compare(
        {
            "estimate": lambda: estimate_tokens(messages),
            "json_dumps": lambda: json.dumps(messages, ensure_ascii=False),
            "three_regex": lambda: naive_estimate(messages),
        },
        repeats,
    )
    results["seconds"] = main.seconds
    results["ratios"] = {
        "estimate_vs_json_dumps": main.ratio("estimate", "json_dumps"),
        "three_regex_vs_estimate": main.ratio("three_regex", "estimate"),
        "three_regex_vs_json_dumps": main.ratio("three_regex", "json_dumps"),
    }

    strings = [s for m in messages for s in _strings(m.get("content"), [])]
    ascii_strings = [s for s in strings if s.isascii()]
    other_strings = [s for s in strings if not s.isascii()]
    hollow = _hollow(messages)
    short = "Let me read the file first."
    parts = _history.compare(
        {
            "ascii_strings": lambda: estimate_tokens([{"role": "u", "content": ascii_strings}]),
            "ascii_strings_json": lambda: json.dumps(ascii_strings, ensure_ascii=False),
            "other_strings": lambda: estimate_tokens([{"role": "u", "content": other_strings}]),
            "other_strings_json": lambda: json.dumps(other_strings, ensure_ascii=False),
            "walk_only": lambda: estimate_tokens(hollow),
            "walk_only_json": lambda: json.dumps(hollow, ensure_ascii=False),
            "short_string": lambda: text_quarters(short),
            "short_string_json": lambda: json.dumps(short, ensure_ascii=False),
        },
        repeats,
    )
    results["breakdown"] = {
        "ascii_chars": sum(map(len, ascii_strings)),
        "other_chars": sum(map(len, other_strings)),
        "seconds": parts.seconds,
        "ratios_vs_json_dumps": {
            name: parts.ratio(name, name + "_json")
            for name in ("ascii_strings", "other_strings", "walk_only", "short_string")
        },
    }

    # All sizes take turns within each run, so that drift cannot bend the curve.
    histories = {scale: _history.scaled_history(messages, scale) for scale in scales}
    funcs: dict[str, Any] = {}
    for scale, history in histories.items():
        funcs[f"estimate_{scale}"] = lambda h=history: estimate_tokens(h)
        funcs[f"json_dumps_{scale}"] = lambda h=history: json.dumps(h, ensure_ascii=False)
    times = _history.compare(funcs, repeats)
    first = scales[0]
    scaling: dict[str, Any] = {}
    for scale, history in histories.items():
        scaling[f"{scale}x"] = {
            "messages": len(history),
            "tokens": estimate_tokens(history),
            "estimate_seconds": times.seconds[f"estimate_{scale}"],
            "estimate_vs_1x": times.ratio(f"estimate_{scale}", f"estimate_{first}"),
            "json_dumps_vs_1x": times.ratio(f"json_dumps_{scale}", f"json_dumps_{first}"),
            "estimate_vs_json_dumps": times.ratio(f"estimate_{scale}", f"json_dumps_{scale}"),
        }
    results["scaling"] = scaling
    return results


def print_report(results: dict[str, Any]) -> None:
    history = results["history"]
    seconds = results["seconds"]
    ratios = results["ratios"]
    print(
        f"Python {history['python']}; history: {history['messages']} messages, "
        f"{history['tokens']} estimated tokens, {history['json_chars']} JSON characters, "
        f"{history['messages_with_chinese']} messages with Chinese text; "
        f"median of {results['repeats']} runs"
    )
    print("estimate_tokens(messages):")
    print(_history.report_line("json.dumps(messages, ensure_ascii=False)", seconds["json_dumps"]))
    print(
        _history.report_line(
            "estimate_tokens",
            seconds["estimate"],
            ratios["estimate_vs_json_dumps"],
            "json.dumps (target <= 1.0)",
        )
    )
    print(
        _history.report_line(
            "three-regex estimate",
            seconds["three_regex"],
            ratios["three_regex_vs_estimate"],
            "estimate_tokens (target >= 10)",
        )
    )
    breakdown = results["breakdown"]
    print(
        f"where the time goes (each against json.dumps of the same part; "
        f"{breakdown['ascii_chars']} ASCII / {breakdown['other_chars']} other characters):"
    )
    labels = {
        "ascii_strings": "ASCII strings",
        "other_strings": "strings with non-ASCII characters",
        "walk_only": "the structure, every string emptied",
        "short_string": "text_quarters of one short string",
    }
    for name, label in labels.items():
        print(
            _history.report_line(
                label,
                breakdown["seconds"][name],
                breakdown["ratios_vs_json_dumps"][name],
                "json.dumps",
            )
        )
    print("scaling (target: 4x the history at most 4.4x the time):")
    for scale, row in results["scaling"].items():
        print(
            f"  {scale:>3}: {row['messages']:5d} messages {row['tokens']:7d} tokens "
            f"{row['estimate_seconds'] * 1e3:8.3f} ms  estimate {row['estimate_vs_1x']:5.2f}x "
            f"(json.dumps {row['json_dumps_vs_1x']:5.2f}x)  "
            f"vs json.dumps {row['estimate_vs_json_dumps']:.2f}"
        )


def main(argv: list[str] | None = None) -> int:
    return _history.main(__doc__ or "", run, print_report, argv)


if __name__ == "__main__":
    sys.exit(main())
