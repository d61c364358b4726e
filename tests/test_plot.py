"""The SVG chart and the terminal sparkline."""

from __future__ import annotations

import io
import math
import random
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from bareagent_compact.cli import main
from bareagent_compact.cli.demo import DEMO_THRESHOLD, run_demo
from bareagent_compact.cli.plot import (
    CHAR_WIDTH,
    axis_top,
    compare_chart,
    marks_line,
    sparkline,
    svg_chart,
)
from bareagent_compact.cli.turns import TurnRecord
from bareagent_compact.result import Action

SVG = "{http://www.w3.org/2000/svg}"


def classes(root: ET.Element, name: str) -> list[ET.Element]:
    return [e for e in root.iter() if name in e.get("class", "").split()]


def texts(root: ET.Element) -> list[str]:
    return [e.text or "" for e in root.iter(f"{SVG}text")]


def turn(n: int, tokens_in: int, after: int, action: Action, calls: int = 0) -> TurnRecord:
    return TurnRecord(
        turn=n, index=n, tokens_in=tokens_in, tokens_before=tokens_in, tokens_after=after,
        action=action, truncated=int(action is Action.MICRO), messages=n, summary_calls=calls,
    )  # fmt: skip


def test_demo_plot_has_the_threshold_line_and_one_marker_per_full_compaction(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "demo.svg"
    assert main(["demo", "--plot", str(path)]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line[:4].strip().isdigit()]
    full_rows = sum(1 for row in rows if row.split()[-2] == "full")
    forced = "/compact (force=True): full" in out
    assert full_rows >= 1 and forced
    assert f"Picture: {path}" in out

    root = ET.parse(path).getroot()  # well-formed XML, or this raises
    assert root.tag == f"{SVG}svg"
    threshold = root.find(f".//{SVG}line[@id='threshold']")
    assert threshold is not None
    assert threshold.get("data-tokens") == str(DEMO_THRESHOLD)
    assert threshold.get("y1") == threshold.get("y2")
    # The line sits where the y axis puts the threshold's value.
    tick = next(e for e in root.iter(f"{SVG}text") if (e.text or "") == f"{DEMO_THRESHOLD:,}")
    assert float(tick.get("y", "0")) - 4 == pytest.approx(float(threshold.get("y1", "0")), abs=0.2)
    assert len(classes(root, "full")) == full_rows + forced
    assert len(classes(root, "micro")) == sum(1 for row in rows if row.split()[-2] == "micro")
    labels = " ".join(texts(root))
    assert "estimated tokens" in labels and "turn" in labels  # axis labels
    assert f"full compaction ({full_rows + forced})" in labels  # legend
    assert f"summary calls: {full_rows + forced}" in labels


def test_demo_records_the_turns_it_prints() -> None:
    out, turns = io.StringIO(), []
    run_demo(out, turns=turns)
    rows = [line for line in out.getvalue().splitlines() if line[:4].strip().isdigit()]
    assert len(turns) == len(rows) + 1  # and the closing /compact
    assert [t.action.value for t in turns[:-1]] == [row.split()[-2] for row in rows]
    assert [t.tokens_in for t in turns[:-1]] == [int(row.split()[-6]) for row in rows]
    assert turns[-1].action is Action.FULL and turns[-1].summary_calls == 1


def test_every_action_gets_its_marker_and_tooltip() -> None:
    turns = [
        turn(1, 100, 100, Action.NONE),
        turn(2, 900, 700, Action.MICRO),
        turn(3, 1300, 200, Action.FULL, calls=1),
        turn(4, 1200, 1200, Action.FAILED, calls=1),
    ]
    root = ET.fromstring(svg_chart(turns, 1000, "a <test> & more"))
    assert [len(classes(root, k)) for k in ("full", "micro", "failed")] == [1, 1, 1]
    (full,) = classes(root, "full")
    tooltip = full.find(f"{SVG}title")
    assert tooltip is not None and tooltip.text == "turn 3: full, 1,300 -> 200 tokens"
    assert "a <test> & more" in texts(root)
    assert "4 turns, 1 full compaction, 1 micro-compaction, 2 summary calls" in texts(root)
    context = root.find(f".//{SVG}polyline[@id='context']")
    assert context is not None
    # Up to the size at each turn's start, then down to what was sent where they differ.
    assert len(context.get("points", "").split()) == 4 + 2


def test_an_empty_replay_still_draws_axes_and_threshold() -> None:
    root = ET.fromstring(svg_chart([], 500))
    assert root.find(f".//{SVG}line[@id='threshold']") is not None
    assert root.find(f".//{SVG}polyline") is None


def test_sparkline_scales_to_the_peak_and_fits_the_width() -> None:
    assert sparkline([0, 50, 100]) == "▁▄█"
    long = sparkline(list(range(1000)), width=40)
    assert len(long) == 40 and long[0] == "▁" and long[-1] == "█"
    assert sparkline([]) == ""


def test_marks_line_puts_full_micro_and_failed_under_their_turns() -> None:
    turns = [turn(n, 10, 10, Action.NONE) for n in range(1, 7)]
    turns[1] = turn(2, 10, 5, Action.MICRO)
    turns[3] = turn(4, 10, 1, Action.FULL)
    turns[4] = turn(5, 10, 10, Action.FAILED)
    assert marks_line(turns) == " m Fx"
    # Buckets of several turns show the most important action among them.
    assert marks_line(turns, width=3) == "mFx"


# -- the y axis fits; labels never overlap ----------------------------------------------


def y_ticks(root: ET.Element) -> list[int]:
    """The y-axis tick labels (the right-aligned texts left of the plot)."""
    return [
        int((e.text or "").replace(",", ""))
        for e in root.iter(f"{SVG}text")
        if e.get("text-anchor") == "end"
    ]


def test_the_axis_top_is_a_round_number_just_above_the_data() -> None:
    rng = random.Random(21)
    values = [rng.uniform(1, 10 ** rng.randint(1, 7)) for _ in range(2000)]
    for value in [*values, 1, 5, 20_000, 6_000, 10_001, 99_999]:
        top, step = axis_top(value)
        assert value * 1.02 <= top <= value * 1.02 + step and top <= value * 1.35
        assert 4 <= round(top / step) <= 9
        mantissa = step / 10 ** math.floor(math.log10(step))
        assert round(mantissa, 6) in (1.0, 2.0, 5.0)


def test_a_20k_threshold_gets_an_axis_near_20k_not_50k() -> None:
    turns = [turn(n, 1500 * n, 1500 * n, Action.NONE) for n in range(1, 13)]
    root = ET.fromstring(svg_chart(turns, 20_000))
    ticks = y_ticks(root)
    assert max(ticks) == 25_000 and ticks == sorted(ticks) and ticks[0] == 0
    # With data above the threshold, the axis follows the data.
    turns.append(turn(13, 31_000, 9_000, Action.FULL, calls=1))
    assert max(y_ticks(ET.fromstring(svg_chart(turns, 20_000)))) == 35_000


def label_box(element: ET.Element) -> tuple[float, float, float, float]:
    """The box the chart reserves for a 12 px label (its documented rule)."""
    x, y = float(element.get("x", "0")), float(element.get("y", "0"))
    return (x, y - 12, x + len(element.text or "") * CHAR_WIDTH, y + 4)


def marker_boxes(root: ET.Element) -> list[tuple[float, float, float, float]]:
    """Each marker's bounding box, read from its circle or path."""
    boxes = []
    for e in classes(root, "marker"):
        if e.tag == f"{SVG}circle":
            cx, cy, r = (float(e.get(k, "0")) for k in ("cx", "cy", "r"))
            boxes.append((cx - r, cy - r, cx + r, cy + r))
        else:
            numbers = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", e.get("d", ""))]
            xs, ys = numbers[0::2], numbers[1::2]
            if e.get("d", "").count("H"):  # the full marker: M x,y H x2 L x3,y3 Z
                xs, ys = [numbers[0], numbers[2], numbers[3]], [numbers[1], numbers[4]]
            boxes.append((min(xs), min(ys), max(xs), max(ys)))
    return boxes


def overlap(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def random_turns(rng: random.Random, threshold: int) -> list[TurnRecord]:
    turns = []
    for n in range(1, rng.randint(2, 120)):
        action = rng.choice([Action.NONE, Action.MICRO, Action.FULL, Action.FAILED])
        before = int(threshold * rng.uniform(0.7, 1.2))
        after = before if action is Action.NONE else int(threshold * rng.uniform(0.6, 1.1))
        turns.append(turn(n, before, after, action))
    return turns


def test_the_threshold_label_never_covers_a_marker() -> None:
    rng = random.Random(8)
    placed = 0
    for _ in range(300):
        threshold = rng.choice([3000, 20_000, 100_000])
        root = ET.fromstring(svg_chart(random_turns(rng, threshold), threshold))
        label = root.find(f".//{SVG}text[@id='threshold-label']")
        assert any(t.startswith("threshold ") and t.endswith(f"{threshold:,}") for t in texts(root))
        if label is None:
            continue  # no free spot: the legend alone gives the value
        placed += 1
        box = label_box(label)
        assert not any(overlap(box, marker) for marker in marker_boxes(root))
        plot = root.find(f"{SVG}rect[@stroke='#999']")
        assert plot is not None
        left, top = float(plot.get("x", "0")), float(plot.get("y", "0"))
        assert left <= box[0] and top <= box[1]
        assert box[2] <= left + float(plot.get("width", "0"))
        assert box[3] <= top + float(plot.get("height", "0"))
    assert placed > 200  # a free spot is the rule, not the exception


def test_markers_along_the_threshold_push_the_label_below_it() -> None:
    turns = [turn(n, 1010, 400, Action.FULL, calls=1) for n in range(1, 60)]
    root = ET.fromstring(svg_chart(turns, 1000))
    label = root.find(f".//{SVG}text[@id='threshold-label']")
    line = root.find(f".//{SVG}line[@id='threshold']")
    assert label is not None and line is not None
    assert float(label.get("y", "0")) > float(line.get("y1", "0"))
    assert not any(overlap(label_box(label), m) for m in marker_boxes(root))


def test_the_compare_chart_has_a_line_and_a_legend_row_per_setting() -> None:
    series = [
        ("default", [turn(1, 500, 500, Action.NONE), turn(2, 1200, 300, Action.FULL)], 1000),
        ("threshold=2000", [turn(1, 500, 500, Action.NONE), turn(2, 1200, 1200, Action.NONE)],
         2000),
        ("a\x00<weird> & very long label that goes on", [turn(1, 100, 100, Action.NONE)], 1000),
    ]  # fmt: skip
    svg = compare_chart(series, "compare <x>")
    root = ET.fromstring(svg)
    assert len([e for e in root.iter() if e.get("class") == "setting"]) == 3
    assert [e.get("data-tokens") for e in root.iter() if e.get("class") == "threshold"] == [
        "1000", "2000",
    ]  # fmt: skip
    assert "a<weird> & very long la…" in texts(root) and "\x00" not in svg
    assert max(y_ticks(root)) == 2500
    assert root.find(f".//{SVG}text[@id='threshold-label']") is None  # the legend says it
