"""``replay --compare``: one recorded session replayed under several settings, side by side.

Each setting's replay prices its model requests with the prompt-cache model of
:class:`~bareagent_compact.cli.turns.PromptCache` and adds its summary requests
(their input uncached, their output at the output price). Costs are in
input-token equivalents: one uncached input token costs 1.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Final, TextIO

from bareagent_compact.cli.replay import ReplayResult
from bareagent_compact.cli.settings import Setting
from bareagent_compact.result import Action

CACHE_WRITE_PRICE: Final = 1.25
"""Anthropic: a 5-minute cache write costs 1.25 x the base input price."""
CACHE_READ_PRICE: Final = 0.1
"""Anthropic: a cache read costs 0.1 x the base input price."""
OUTPUT_PRICE: Final = 5.0
"""Anthropic: output costs 5 x input (e.g. $3 / $15 per million tokens)."""


@dataclass(frozen=True, slots=True)
class Prices:
    """Prices per token, in units of an uncached input token."""

    cache_write: float = CACHE_WRITE_PRICE
    cache_read: float = CACHE_READ_PRICE
    output: float = OUTPUT_PRICE


@dataclass(frozen=True, slots=True)
class Outcome:
    """One setting and its replay."""

    setting: Setting
    result: ReplayResult

    @property
    def threshold(self) -> int:
        return int(self.setting.options["threshold"])


def figures(result: ReplayResult, prices: Prices) -> dict[str, Any]:
    """One setting's row: compactions, context sent, the cache and the cost."""
    turns = result.turns
    sent = [t.tokens_after for t in turns]
    read = sum(t.cache.read for t in turns)
    written = sum(t.cache.written for t in turns)
    uncached = sum(t.cache.uncached for t in turns)
    summary_in = sum(t.summary_input_tokens for t in turns)
    summary_out = sum(t.summary_output_tokens for t in turns)
    requests = uncached + written * prices.cache_write + read * prices.cache_read
    summaries = summary_in + summary_out * prices.output
    return {
        "turns": len(turns),
        "full": result.count(Action.FULL),
        "failed": result.count(Action.FAILED),
        "summary_calls": result.summary_calls,
        "peak_context": max(sent, default=0),
        "mean_context": round(sum(sent) / len(sent), 1) if sent else 0.0,
        "input_tokens": sum(sent),
        "cache_read": read,
        "cache_written": written,
        "uncached": uncached,
        "cache_read_share": round(read / sum(sent), 4) if sum(sent) else 0.0,
        "summary_input_tokens": summary_in,
        "summary_output_tokens": summary_out,
        "request_cost": round(requests, 1),
        "summary_cost": round(summaries, 1),
        "cost": round(requests + summaries, 1),
    }


def compare_json(outcomes: Sequence[Outcome], prices: Prices) -> list[dict[str, Any]]:
    """Every setting: its label, options, figures (``vs_first``: cost / the first's) and turns."""
    rows = [figures(o.result, prices) for o in outcomes]
    first = rows[0]["cost"] if rows else 0.0
    return [
        {
            "label": o.setting.label,
            "options": o.setting.options,
            "summary": {**row, "vs_first": round(row["cost"] / first, 4) if first else None},
            "turns": [turn_json(t) for t in o.result.turns],
        }
        for o, row in zip(outcomes, rows, strict=True)
    ]


def turn_json(turn: Any) -> dict[str, Any]:
    return {**asdict(turn), "action": turn.action.value}


_COLUMNS: Final[tuple[tuple[str, int, Callable[[dict[str, Any]], str]], ...]] = (
    ("full", 6, lambda r: f"{r['full']:,}"),
    ("calls", 7, lambda r: f"{r['summary_calls']:,}"),
    ("peak", 9, lambda r: f"{r['peak_context']:,}"),
    ("mean", 9, lambda r: f"{r['mean_context']:,.0f}"),
    ("cache read", 12, lambda r: f"{r['cache_read_share']:.0%}"),
    ("summaries", 11, lambda r: f"{r['summary_cost']:,.0f}"),
    ("cost", 12, lambda r: f"{r['cost']:,.0f}"),
    ("vs first", 10, lambda r: "-" if r["vs_first"] is None else f"{r['vs_first']:.2f}x"),
)


def write_table(out: TextIO, rows: list[dict[str, Any]]) -> None:
    """The comparison: a row per setting."""
    width = min(40, max([7, *(len(r["label"]) for r in rows)]))
    out.write(f"{'setting':<{width}}" + "".join(f"{n:>{w}}" for n, w, _ in _COLUMNS) + "\n")
    for row in rows:
        label = row["label"] if len(row["label"]) <= width else row["label"][: width - 1] + "…"
        cells = "".join(f"{cell(row['summary']):>{w}}" for _, w, cell in _COLUMNS)
        out.write(f"{label:<{width}}{cells}\n")


def write_notes(out: TextIO, prices: Prices, min_tokens: int) -> None:
    out.write(
        "\npeak, mean: estimated tokens sent to the model per turn; cache read: share of that\n"
        "input read from the prompt cache (one breakpoint on the last message, requests under\n"
        f"{min_tokens:,} tokens not cached); cost, in uncached input tokens: requests (cache "
        f"writes x{prices.cache_write:g},\nreads x{prices.cache_read:g}) plus summaries (input "
        f"x1, output x{prices.output:g}), the latter also shown alone\n"
    )
