"""``replay --compare``: one recorded session replayed under several settings, side by side.

Each setting's replay prices its model requests with the prompt-cache model of
:class:`~bareagent_compact.cli.turns.PromptCache` and adds its summary requests
(their input uncached unless the provider reported cache reads or writes, their
output at the output price). Costs are in input-token equivalents (one uncached
input token costs 1), or in the currency of a price table given per million
tokens (``--prices``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Final, TextIO

from bareagent_compact.cli.replay import ReplayResult
from bareagent_compact.cli.settings import Setting
from bareagent_compact.cli.turns import TurnRecord
from bareagent_compact.result import Action

CACHE_WRITE_PRICE: Final = 1.25
"""Anthropic: a 5-minute cache write costs 1.25 x the base input price."""
CACHE_READ_PRICE: Final = 0.1
"""Anthropic: a cache read costs 0.1 x the base input price."""
OUTPUT_PRICE: Final = 5.0
"""Anthropic: output costs 5 x input (e.g. $3 / $15 per million tokens)."""


PRICE_KEYS: Final = ("input", "output", "cache_read", "cache_write")
"""The keys of a ``--prices`` table."""


@dataclass(frozen=True, slots=True)
class Prices:
    """Prices per token, in units of an uncached input token; or, with
    ``per_million``, per million tokens in a currency (the costs then in it)."""

    cache_write: float = CACHE_WRITE_PRICE
    cache_read: float = CACHE_READ_PRICE
    output: float = OUTPUT_PRICE
    input: float = 1.0
    per_million: bool = False

    def of(self, uncached: float, written: float, read: float, output: float = 0) -> float:
        """The cost of these token counts."""
        total = (
            uncached * self.input
            + written * self.cache_write
            + read * self.cache_read
            + output * self.output
        )
        return total / 1_000_000 if self.per_million else total

    def rounded(self, cost: float) -> float:
        return round(cost, 6 if self.per_million else 1)


def parse_prices(text: str) -> Prices:
    """A ``--prices`` table, per million tokens: ``input=3,output=15,cache_read=0.3,
    cache_write=3.75``, or the path of a JSON file holding an object of those keys.
    ``input`` is required; a price left out is Anthropic's share of it (output 5x,
    cache reads 0.1x, cache writes 1.25x). ``ValueError`` for anything else."""
    table = _price_table(text)
    unknown = sorted(set(table) - set(PRICE_KEYS))
    if unknown:
        raise ValueError(f"unknown price {unknown[0]!r}; expected {', '.join(PRICE_KEYS)}")
    values: dict[str, float] = {}
    for key, value in table.items():
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ValueError(f"price {key!r} must be a number, got {value!r}")
        try:
            values[key] = float(value)
        except ValueError:
            raise ValueError(f"price {key!r} must be a number, got {value!r}") from None
        if not 0 <= values[key] < float("inf"):
            raise ValueError(f"price {key!r} must be >= 0, got {value!r}")
    if "input" not in values:
        raise ValueError("the price table needs input=PRICE (per million input tokens)")
    base = values["input"]
    return Prices(
        values.get("cache_write", round(base * CACHE_WRITE_PRICE, 9)),
        values.get("cache_read", round(base * CACHE_READ_PRICE, 9)),
        values.get("output", round(base * OUTPUT_PRICE, 9)),
        base,
        per_million=True,
    )


def _price_table(text: str) -> dict[str, object]:
    """The ``key=value`` pairs of ``text``, or the JSON object of the file it names."""
    if "=" not in text:
        try:
            with open(text, encoding="utf-8") as file:
                table = json.load(file)
        except (OSError, json.JSONDecodeError) as error:
            raise ValueError(f"cannot read a price table from {text!r}: {error}") from None
        if not isinstance(table, dict):
            raise ValueError(f"the price table in {text!r} must be a JSON object")
        return dict(table)
    pairs: dict[str, object] = {}
    for term in text.split(","):
        key, sep, value = term.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key or key in pairs:
            raise ValueError(f"expected KEY=PRICE terms separated by commas, got {term!r}")
        pairs[key] = value.strip()
    return pairs


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
    requests = prices.of(uncached, written, read)
    summary = _summary_figures(turns)
    summaries = prices.of(
        max(0, summary["summary_input_tokens"] - summary["summary_cache_read"]
            - summary["summary_cache_written"]),
        summary["summary_cache_written"],
        summary["summary_cache_read"],
        summary["summary_output_tokens"],
    )
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
        **summary,
        "request_cost": prices.rounded(requests),
        "summary_cost": prices.rounded(summaries),
        "cost": prices.rounded(requests + summaries),
    }


def _summary_figures(turns: Sequence[TurnRecord]) -> dict[str, int]:
    """The summary requests' token counts over ``turns``."""
    return {
        name: sum(getattr(t, name) for t in turns)
        for name in (
            "summary_input_tokens",
            "summary_output_tokens",
            "summary_cache_read",
            "summary_cache_written",
        )
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


Column = tuple[str, int, Callable[[dict[str, Any]], str]]


def _columns(decimals: int) -> tuple[Column, ...]:
    """The table's columns, costs shown with ``decimals`` digits after the point."""
    return (
        ("full", 6, lambda r: f"{r['full']:,}"),
        ("calls", 7, lambda r: f"{r['summary_calls']:,}"),
        ("peak", 9, lambda r: f"{r['peak_context']:,}"),
        ("mean", 9, lambda r: f"{r['mean_context']:,.0f}"),
        ("cache read", 12, lambda r: f"{r['cache_read_share']:.0%}"),
        ("summaries", 11, lambda r: f"{r['summary_cost']:,.{decimals}f}"),
        ("cost", 12, lambda r: f"{r['cost']:,.{decimals}f}"),
        ("vs first", 10, lambda r: "-" if r["vs_first"] is None else f"{r['vs_first']:.2f}x"),
    )


def write_table(out: TextIO, rows: list[dict[str, Any]], prices: Prices | None = None) -> None:
    """The comparison: a row per setting (costs in currency for ``per_million`` prices)."""
    columns = _columns(2 if prices is not None and prices.per_million else 0)
    width = min(40, max([7, *(len(r["label"]) for r in rows)]))
    out.write(f"{'setting':<{width}}" + "".join(f"{n:>{w}}" for n, w, _ in columns) + "\n")
    for row in rows:
        label = row["label"] if len(row["label"]) <= width else row["label"][: width - 1] + "…"
        cells = "".join(f"{cell(row['summary']):>{w}}" for _, w, cell in columns)
        out.write(f"{label:<{width}}{cells}\n")


def write_notes(out: TextIO, prices: Prices, min_tokens: int) -> None:
    if prices.per_million:
        out.write(
            "\npeak, mean: estimated tokens sent to the model per turn; cache read: share of that\n"
            "input read from the prompt cache (one breakpoint on the last message, requests under\n"
            f"{min_tokens:,} tokens not cached); cost, at these prices per million tokens (input "
            f"{prices.input:g},\ncache writes {prices.cache_write:g}, reads {prices.cache_read:g}, "
            f"output {prices.output:g}): the requests plus the summary requests,\n"
            "the latter also shown alone\n"
        )
        return
    out.write(
        "\npeak, mean: estimated tokens sent to the model per turn; cache read: share of that\n"
        "input read from the prompt cache (one breakpoint on the last message, requests under\n"
        f"{min_tokens:,} tokens not cached); cost, in uncached input tokens: requests (cache "
        f"writes x{prices.cache_write:g},\nreads x{prices.cache_read:g}) plus summaries (input "
        f"x1, output x{prices.output:g}), the latter also shown alone\n"
    )
