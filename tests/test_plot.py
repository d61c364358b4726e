"""The SVG chart and the terminal sparkline."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from bareagent_compact.cli import main
from bareagent_compact.cli.demo import DEMO_THRESHOLD, run_demo
from bareagent_compact.cli.plot import marks_line, sparkline, svg_chart
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
