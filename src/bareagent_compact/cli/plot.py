"""Pictures of a session's context size per turn: an SVG chart and a terminal sparkline.

The SVG is written by hand (standard library only) and opens in any browser:
the context size as a sawtooth (growth while the agent works, a drop at each
compaction), the threshold as a dashed line, a marker per full compaction,
micro-compaction and failed compaction, axis labels, a legend and the number
of summary calls.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final
from xml.sax.saxutils import escape as _escape_xml

from bareagent_compact.cli.turns import TurnRecord
from bareagent_compact.result import Action

__all__ = ["axis_top", "compare_chart", "marks_line", "sparkline", "svg_chart"]

WIDTH: Final = 960
HEIGHT: Final = 440
_LEFT: Final = 84
_RIGHT: Final = 220
_TOP: Final = 56
_BOTTOM: Final = 62
_BARS: Final = "▁▂▃▄▅▆▇█"
_COLORS: Final = {
    "context": "#1f6fb4",
    "threshold": "#c62828",
    "full": "#c62828",
    "micro": "#ef8c00",
    "failed": "#222222",
    "grid": "#e3e3e3",
    "text": "#222222",
}


_NOT_XML: Final = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ufffe\uffff]")
"""Control characters (and two non-characters) that XML text must not hold."""
_SURROGATES: Final = re.compile("[\ud800-\udfff]")


def escape(text: str) -> str:
    """``text`` for an SVG: control characters removed, lone surrogates (such as a file
    name's undecodable bytes) as U+FFFD, and ``&``, ``<``, ``>`` escaped."""
    return _escape_xml(_SURROGATES.sub("\ufffd", _NOT_XML.sub("", text)))


def _nice_ceiling(value: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten that is at least ``value``."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if step * power >= value:
            return float(step * power)
    return float(10 * power)  # pragma: no cover - the loop always returns


def _ticks(top: float, count: int = 5) -> list[float]:
    step = _nice_ceiling(top / count)
    return [step * i for i in range(int(top // step) + 1)]


def axis_top(value: float) -> tuple[float, float]:
    """The y axis for data up to ``value``: a round top just above it, and the tick step.

    The step is the 1-2-5 number at least ``value / 8``; the top is the first
    multiple of it above ``value`` plus 2%. So the axis runs at most about a third
    past ``value`` (``20,000`` -> ``25,000``, never ``50,000``), with 4 to 9 ticks.
    """
    if value <= 0:
        return 1.0, 1.0
    step = _nice_ceiling(value / 8)
    return step * (math.floor(value * 1.02 / step) + 1), step


def _fmt(value: float) -> str:
    return f"{round(value):,}"


_PLOT_W: Final = WIDTH - _LEFT - _RIGHT
_PLOT_H: Final = HEIGHT - _TOP - _BOTTOM


@dataclass(frozen=True, slots=True)
class _Scale:
    """Where a turn and a token count fall on the chart."""

    top: float
    """The largest token count on the y axis."""
    last_turn: int
    step: float
    """The token count between two ticks."""

    @classmethod
    def fitting(cls, peak: float, last_turn: int) -> _Scale:
        """The scale whose y axis fits ``peak`` (see :func:`axis_top`)."""
        top, step = axis_top(peak)
        return cls(top, max(last_turn, 1), step)

    def x(self, turn: float) -> float:
        return _LEFT + (turn - 0.5) / self.last_turn * _PLOT_W

    def y(self, tokens: float) -> float:
        return _TOP + _PLOT_H - tokens / self.top * _PLOT_H


def _by_action(turns: Sequence[TurnRecord], action: Action) -> list[TurnRecord]:
    return [t for t in turns if t.action is action]


def svg_chart(turns: Sequence[TurnRecord], threshold: int, title: str = "context per turn") -> str:
    """An SVG document drawing ``turns`` against ``threshold``."""
    peak = max([threshold, *(t.tokens_in for t in turns), *(t.tokens_before for t in turns)])
    scale = _Scale.fitting(peak, len(turns))
    full = _by_action(turns, Action.FULL)
    micro = _by_action(turns, Action.MICRO)
    failed = _by_action(turns, Action.FAILED)
    calls = sum(t.summary_calls for t in turns)
    out: list[str] = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
        f"<title>{escape(title)}</title>",
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        f'<text x="{_LEFT}" y="24" font-size="16" font-weight="bold" '
        f'fill="{_COLORS["text"]}">{escape(title)}</text>',
        f'<text x="{_LEFT}" y="42" fill="#555">{len(turns)} turns, {len(full)} full '
        f"compaction{'s' * (len(full) != 1)}, {len(micro)} micro-compaction"
        f"{'s' * (len(micro) != 1)}, {calls} summary call{'s' * (calls != 1)}</text>",
    ]
    out += _axes(scale)
    out += _context_line(scale, turns)
    boxes = [marker_box(scale, t) for t in (*micro, *full, *failed)]
    out += _threshold_line(scale, threshold, boxes)
    out += _markers(scale, micro, full, failed)
    out.extend(_legend(len(full), len(micro), len(failed), calls, threshold))
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _axes(scale: _Scale) -> list[str]:
    """Grid, ticks and axis labels."""
    out = []
    for i in range(round(scale.top / scale.step) + 1):
        value = scale.step * i
        py = scale.y(value)
        out.append(
            f'<line x1="{_LEFT}" y1="{py:.1f}" x2="{_LEFT + _PLOT_W}" y2="{py:.1f}" '
            f'stroke="{_COLORS["grid"]}"/>'
        )
        out.append(f'<text x="{_LEFT - 8}" y="{py + 4:.1f}" text-anchor="end">{_fmt(value)}</text>')
    for value in _ticks(scale.last_turn, 8):
        turn = max(value, 1)
        px = scale.x(turn)
        out.append(
            f'<text x="{px:.1f}" y="{_TOP + _PLOT_H + 18}" text-anchor="middle">{_fmt(turn)}</text>'
        )
    out.append(
        f'<rect x="{_LEFT}" y="{_TOP}" width="{_PLOT_W}" height="{_PLOT_H}" fill="none" '
        'stroke="#999"/>'
    )
    out.append(
        f'<text x="{_LEFT + _PLOT_W / 2:.1f}" y="{HEIGHT - 18}" text-anchor="middle" '
        'font-size="13">turn (one model call each)</text>'
    )
    out.append(
        f'<text transform="translate(22 {_TOP + _PLOT_H / 2:.1f}) rotate(-90)" '
        'text-anchor="middle" font-size="13">estimated tokens</text>'
    )
    return out


def _context_line(scale: _Scale, turns: Sequence[TurnRecord]) -> list[str]:
    """The context: up to tokens_in at each turn, down to what was sent to the model."""
    points: list[str] = []
    for t in turns:
        points.append(f"{scale.x(t.turn):.1f},{scale.y(t.tokens_in):.1f}")
        if t.tokens_after != t.tokens_in:
            points.append(f"{scale.x(t.turn):.1f},{scale.y(t.tokens_after):.1f}")
    if not points:
        return []
    return [
        f'<polyline id="context" points="{" ".join(points)}" fill="none" '
        f'stroke="{_COLORS["context"]}" stroke-width="1.6" stroke-linejoin="round"/>'
    ]


Box = tuple[float, float, float, float]
"""``(left, top, right, bottom)`` in SVG pixels."""

CHAR_WIDTH: Final = 7.5
"""The width reserved per character of 12 px text (wider than any digit or
lower-case letter of a sans-serif face at that size)."""


def text_box(x: float, baseline: float, text: str) -> Box:
    """The box reserved for 12 px text starting at ``x`` on ``baseline``."""
    return (x, baseline - 12, x + len(text) * CHAR_WIDTH, baseline + 4)


def marker_box(scale: _Scale, t: TurnRecord) -> Box:
    """The box a turn's marker covers (as :func:`_markers` draws it)."""
    px = scale.x(t.turn)
    if t.action is Action.FULL:
        py = scale.y(t.tokens_before)
        return (px - 6, py - 9, px + 6, py + 1)
    py = scale.y(t.tokens_after)
    return (px - 5, py - 5, px + 5, py + 5)


def overlaps(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _label_spot(ty: float, text: str, boxes: list[Box]) -> tuple[float, float] | None:
    """Where the threshold label goes: the leftmost free spot just above the line, else just
    below it, inside the plot and clear of every marker; ``None`` when there is none."""
    width = len(text) * CHAR_WIDTH
    for baseline in (ty - 5, ty + 15):
        if baseline - 12 < _TOP or baseline + 4 > _TOP + _PLOT_H:
            continue
        x = _LEFT + 6.0
        while x + width <= _LEFT + _PLOT_W - 4:
            box = text_box(x, baseline, text)
            if not any(overlaps(box, other) for other in boxes):
                return x, baseline
            x += 12
    return None


def _threshold_line(scale: _Scale, threshold: int, boxes: list[Box]) -> list[str]:
    """The dashed threshold, labelled where no marker is (the legend gives its value too)."""
    ty = scale.y(threshold)
    out = [
        f'<line id="threshold" x1="{_LEFT}" y1="{ty:.1f}" x2="{_LEFT + _PLOT_W}" y2="{ty:.1f}" '
        f'stroke="{_COLORS["threshold"]}" stroke-width="1.4" stroke-dasharray="6 4" '
        f'data-tokens="{threshold}"/>'
    ]
    text = f"threshold {_fmt(threshold)}"
    spot = _label_spot(ty, text, boxes)
    if spot is not None:
        out.append(
            f'<text id="threshold-label" x="{spot[0]:.1f}" y="{spot[1]:.1f}" '
            f'fill="{_COLORS["threshold"]}">{text}</text>'
        )
    return out


def _markers(
    scale: _Scale,
    micro: list[TurnRecord],
    full: list[TurnRecord],
    failed: list[TurnRecord],
) -> list[str]:
    """A marker per micro, full and failed compaction, each with a tooltip."""
    out = [
        f'<circle class="marker micro" cx="{scale.x(t.turn):.1f}" '
        f'cy="{scale.y(t.tokens_after):.1f}" r="3.5" fill="{_COLORS["micro"]}">'
        f"{_tooltip(t)}</circle>"
        for t in micro
    ]
    for t in full:
        px, py = scale.x(t.turn), scale.y(t.tokens_before)
        out.append(
            f'<path class="marker full" d="M{px - 6:.1f},{py - 9:.1f} H{px + 6:.1f} '
            f'L{px:.1f},{py + 1:.1f} Z" fill="{_COLORS["full"]}">{_tooltip(t)}</path>'
        )
    for t in failed:
        px, py = scale.x(t.turn), scale.y(t.tokens_after)
        out.append(
            f'<path class="marker failed" d="M{px - 5:.1f},{py - 5:.1f} L{px + 5:.1f},'
            f'{py + 5:.1f} M{px - 5:.1f},{py + 5:.1f} L{px + 5:.1f},{py - 5:.1f}" '
            f'stroke="{_COLORS["failed"]}" stroke-width="2">{_tooltip(t)}</path>'
        )
    return out


def _tooltip(t: TurnRecord) -> str:
    text = f"turn {t.turn}: {t.action.value}, {_fmt(t.tokens_in)} -> {_fmt(t.tokens_after)} tokens"
    if t.truncated:
        text += f", {t.truncated} results truncated"
    if t.reason:
        text += f" ({t.reason})"
    return f"<title>{escape(text)}</title>"


def _legend(full: int, micro: int, failed: int, calls: int, threshold: int) -> list[str]:
    lx = WIDTH - _RIGHT + 18
    rows = [
        (
            f'<line x1="{lx}" y1="{{y}}" x2="{lx + 22}" y2="{{y}}" '
            f'stroke="{_COLORS["context"]}" stroke-width="2"/>',
            "context size",
        ),
        (
            f'<line x1="{lx}" y1="{{y}}" x2="{lx + 22}" y2="{{y}}" '
            f'stroke="{_COLORS["threshold"]}" stroke-width="1.4" stroke-dasharray="6 4"/>',
            f"threshold {_fmt(threshold)}",
        ),
        (
            f'<path d="M{lx + 5},{{top}} H{lx + 17} L{lx + 11},{{bottom}} Z" '
            f'fill="{_COLORS["full"]}"/>',
            f"full compaction ({full})",
        ),
        (
            f'<circle cx="{lx + 11}" cy="{{y}}" r="3.5" fill="{_COLORS["micro"]}"/>',
            f"micro-compaction ({micro})",
        ),
        (
            f'<path d="M{lx + 6},{{top}} L{lx + 16},{{bottom}} M{lx + 6},{{bottom}} '
            f'L{lx + 16},{{top}}" stroke="{_COLORS["failed"]}" stroke-width="2"/>',
            f"failed compaction ({failed})",
        ),
    ]
    out = [f'<g id="legend" font-size="12" fill="{_COLORS["text"]}">']
    for number, (shape, label) in enumerate(rows):
        row_y = _TOP + 12 + number * 22
        out.append(shape.format(y=row_y, top=row_y - 5, bottom=row_y + 5))
        out.append(f'<text x="{lx + 30}" y="{row_y + 4}">{escape(label)}</text>')
    out.append(f'<text x="{lx}" y="{_TOP + 12 + len(rows) * 22 + 8}">summary calls: {calls}</text>')
    out.append("</g>")
    return out


_PALETTE: Final = (
    "#1f6fb4", "#d1495b", "#2e933c", "#ef8c00", "#7b4fa3", "#00798c", "#8c564b", "#444444",
)  # fmt: skip
"""One colour per ``--compare`` setting (at most eight)."""
_CONTROL: Final = dict.fromkeys([*range(32), *range(127, 160)])


def _clean(text: str, limit: int) -> str:
    """``text`` without control characters, at most ``limit`` long, XML-escaped."""
    text = text.translate(_CONTROL)
    return escape(text if len(text) <= limit else text[: limit - 1] + "…")


Series = tuple[str, Sequence[TurnRecord], int]
"""One line of a comparison chart: its label, its turns and its threshold."""


def compare_chart(series: Sequence[Series], title: str = "settings compared") -> str:
    """An SVG document with a line per setting (context per turn) and each one's threshold.

    Earlier settings are drawn wider, so a line another one covers still shows
    at its edges. No label is drawn inside the plot: the legend names each line, its threshold
    (dashed, in the line's colour) and its full compactions, so no text can
    cover a line's marker or another label.
    """
    peak = max(
        [1, *(s[2] for s in series), *(t.tokens_in for s in series for t in s[1])]
    )
    scale = _Scale.fitting(peak, max([len(s[1]) for s in series] or [1]))
    out = _compare_header(title, len(series))
    out += _axes(scale)
    thresholds: set[int] = set()
    for number, (_, turns, threshold) in enumerate(series):
        color = _PALETTE[number % len(_PALETTE)]
        if threshold not in thresholds:
            thresholds.add(threshold)
            ty = scale.y(threshold)
            out.append(
                f'<line class="threshold" x1="{_LEFT}" y1="{ty:.1f}" x2="{_LEFT + _PLOT_W}" '
                f'y2="{ty:.1f}" stroke="{color}" stroke-width="1.2" stroke-dasharray="6 4" '
                f'data-tokens="{threshold}"/>'
            )
        out += [
            line.replace('id="context"', f'class="setting" data-setting="{number}"')
            .replace(_COLORS["context"], color)
            .replace('stroke-width="1.6"', f'stroke-width="{max(1.2, 3.4 - 0.4 * number):.1f}"')
            for line in _context_line(scale, turns)
        ]
    out += _compare_legend(series)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _compare_header(title: str, settings: int) -> list[str]:
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
        f"<title>{_clean(title, 200)}</title>",
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        f'<text x="{_LEFT}" y="24" font-size="16" font-weight="bold" '
        f'fill="{_COLORS["text"]}">{_clean(title, 90)}</text>',
        f'<text x="{_LEFT}" y="42" fill="#555">{settings} settings; estimated tokens '
        "at each turn before and after compaction</text>",
    ]


def _compare_legend(series: Sequence[Series]) -> list[str]:
    lx = WIDTH - _RIGHT + 18
    out = [f'<g id="legend" font-size="12" fill="{_COLORS["text"]}">']
    for number, (label, turns, threshold) in enumerate(series):
        color = _PALETTE[number % len(_PALETTE)]
        row_y = _TOP + 12 + number * 36
        full = sum(1 for t in turns if t.action is Action.FULL)
        out += [
            f'<line x1="{lx}" y1="{row_y}" x2="{lx + 22}" y2="{row_y}" stroke="{color}" '
            'stroke-width="2.5"/>',
            f'<text x="{lx + 30}" y="{row_y + 4}">{_clean(label, 24)}</text>',
            f'<text x="{lx + 30}" y="{row_y + 18}" fill="#555" font-size="11">threshold '
            f"{_fmt(threshold)}, {full} full</text>",
        ]
    out.append("</g>")
    return out


def sparkline(values: Sequence[int], width: int = 60) -> str:
    """``values`` as block characters, at most ``width`` wide (the maximum of each bucket)."""
    if not values:
        return ""
    buckets = _buckets(len(values), width)
    peaks = [max(values[a:b]) for a, b in buckets]
    top = max(peaks) or 1
    return "".join(_BARS[min(len(_BARS) - 1, v * len(_BARS) // (top + 1))] for v in peaks)


def marks_line(turns: Sequence[TurnRecord], width: int = 60) -> str:
    """Under a sparkline: ``F`` full, ``x`` failed, ``m`` micro, space otherwise."""
    out = []
    for a, b in _buckets(len(turns), width):
        actions = {t.action for t in turns[a:b]}
        out.append(
            "F"
            if Action.FULL in actions
            else "x"
            if Action.FAILED in actions
            else "m"
            if Action.MICRO in actions
            else " "
        )
    return "".join(out).rstrip()


def _buckets(count: int, width: int) -> list[tuple[int, int]]:
    width = max(1, min(width, count))
    return [(i * count // width, (i + 1) * count // width) for i in range(width)]
