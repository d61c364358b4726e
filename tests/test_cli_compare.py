"""``compact`` and ``replay`` take the Compactor's options; ``replay --compare`` replays one
session under several settings and prices each with the prompt-cache model."""

from __future__ import annotations

import json
import re
import shlex
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from bareagent_compact import OfflineSummarizer
from bareagent_compact.cli import main
from bareagent_compact.cli.compare import Prices, figures
from bareagent_compact.cli.demo import scripted_history
from bareagent_compact.cli.replay import replay
from bareagent_compact.cli.turns import PromptCache
from bareagent_compact.prompts import ENGLISH_ACKNOWLEDGEMENT
from bareagent_compact.providers import SummaryText
from bareagent_compact.tokens import estimate_tokens, quarters_to_tokens, text_quarters

DEMO_THRESHOLD = "6000"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exit_:  # argparse
        code = int(exit_.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    path = tmp_path / "demo.json"
    path.write_text(json.dumps(scripted_history(), ensure_ascii=False), encoding="utf-8")
    return path


def compare(capsys: pytest.CaptureFixture[str], path: Path, spec: str, *more: str) -> Any:
    argv = ["replay", str(path), "--threshold", DEMO_THRESHOLD, "--compare", spec, "--json"]
    code, out, err = run(capsys, *argv, *more)
    assert code == 0, err
    return json.loads(out)


# -- the Compactor's options ------------------------------------------------------------


def test_compact_writes_the_language_and_instructions_it_is_given(
    capsys: pytest.CaptureFixture[str], demo: Path, tmp_path: Path
) -> None:
    seen = tmp_path / "prompt.txt"
    command = f"cat > {shlex.quote(str(seen))}; echo SUMMARY"
    code, out, err = run(
        capsys, "compact", str(demo), "--provider-cmd", command, "--language", "en",
        "--instructions", "Keep every port number.", "--json",
    )  # fmt: skip
    assert code == 0, err
    texts = json.dumps(json.loads(out)["messages"], ensure_ascii=False)
    assert ENGLISH_ACKNOWLEDGEMENT in texts and "SUMMARY" in texts
    assert "Keep every port number." in seen.read_text(encoding="utf-8")


def test_replay_takes_micro_pin_facts_keep_tail_and_threshold(
    capsys: pytest.CaptureFixture[str], demo: Path
) -> None:
    code, out, err = run(
        capsys, "replay", str(demo), "--threshold", "5000", "--micro", "cache-friendly",
        "--pin-facts", "--keep-tail-tokens", "800", "--language", "en", "--json",
    )  # fmt: skip
    assert code == 0, err
    options = json.loads(out)["options"]
    assert options["micro"] == "cache-friendly" and options["keep_recent"] == 1  # the preset's
    assert options["pin_facts"] is True and options["keep_tail_tokens"] == 800
    assert options["threshold"] == 5000 and options["language"] == "en"


@pytest.mark.parametrize(
    "argv",
    [
        ["--language", "fr"],
        ["--micro", "aggressive"],
        ["--keep-tail-tokens", "-1"],
        ["--threshold", "lots"],
        ["--keep-recent", "x"],
        ["--max-output-bytes", "0"],
        ["--max-message-tokens", "lots"],
        ["--max-message-tokens", "-5"],
        ["--max-message-tokens", "99"],
        ["--max-message-tokens", ""],
    ],
)
@pytest.mark.parametrize("verb", ["compact", "replay"])
def test_an_invalid_option_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], demo: Path, tmp_path: Path, verb: str, argv: list[str]
) -> None:
    out_path = tmp_path / "out.json"
    extra = ["--provider-cmd", "echo S", "--out", str(out_path)] if verb == "compact" else []
    code, out, err = run(capsys, verb, str(demo), *extra, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "error: " in err and "Traceback" not in err
    assert not out_path.exists()


def _with_huge_observation(demo: Path, tmp_path: Path) -> tuple[Path, str]:
    """The demo's history with a 300,000-character user text (an observation) at its end."""
    huge = "".join(f"{n:7d}\tline of a very long log\n" for n in range(10_000))
    messages = [*json.loads(demo.read_text(encoding="utf-8")), {"role": "user", "content": huge}]
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(messages, ensure_ascii=False), encoding="utf-8")
    return path, huge


@pytest.mark.parametrize(
    ("argv", "whole"),
    [
        ([], False),
        (["--max-message-tokens", "none"], True),
        (["--max-message-tokens", "2k"], False),
    ],
    ids=["default", "none", "2k"],
)
def test_compact_takes_max_message_tokens(
    capsys: pytest.CaptureFixture[str], demo: Path, tmp_path: Path, argv: list[str], whole: bool
) -> None:
    path, huge = _with_huge_observation(demo, tmp_path)
    code, out, err = run(capsys, "compact", str(path), "--provider-cmd", "echo SUMMARY", "--json",
                         *argv)  # fmt: skip
    assert code == 0, err
    last = json.loads(out)["messages"][-1]["content"]
    assert (last == huge) is whole
    if not whole:
        assert "chars cut ...]" in last and last.startswith(huge[:100])
        limit = 2000 if argv else 25_000  # the library's default: half the threshold
        assert limit * 0.9 <= quarters_to_tokens(text_quarters(last)) <= limit


def test_replay_takes_max_message_tokens(capsys: pytest.CaptureFixture[str], demo: Path) -> None:
    for value, expected in (("500", 500), ("1_000", 1000), ("none", None), ("NONE", None)):
        code, out, err = run(capsys, "replay", str(demo), "--max-message-tokens", value, "--json")
        assert code == 0, err
        assert json.loads(out)["options"]["max_message_tokens"] == expected


def test_compare_takes_max_message_tokens(capsys: pytest.CaptureFixture[str], demo: Path) -> None:
    spec = "default,max-message-tokens=none,max_message_tokens=2k,max-message-tokens=150"
    report = compare(capsys, demo, spec, "--max-message-tokens", "700")
    options = [s["options"]["max_message_tokens"] for s in report["settings"]]
    assert options == [700, None, 2000, 150]


# -- replay --compare -------------------------------------------------------------------


def test_compare_reports_every_setting_in_order(
    capsys: pytest.CaptureFixture[str], demo: Path
) -> None:
    spec = "default,cache-friendly,threshold=9000,micro=cache-friendly+threshold=4k"
    report = compare(capsys, demo, spec)
    assert [s["label"] for s in report["settings"]] == spec.split(",")
    options = [s["options"] for s in report["settings"]]
    assert [o["threshold"] for o in options] == [6000, 6000, 9000, 4000]
    assert [o["micro"] for o in options] == ["spec", "cache-friendly", "spec", "cache-friendly"]
    assert report["prices"] == {
        "cache_write": 1.25, "cache_read": 0.1, "output": 5.0, "input": 1.0, "per_million": False
    }
    assert report["settings"][0]["summary"]["vs_first"] == 1.0
    for setting in report["settings"]:
        summary = setting["summary"]
        assert summary["turns"] == len(setting["turns"]) > 0
        assert summary["summary_calls"] == sum(t["summary_calls"] for t in setting["turns"])


def test_a_higher_threshold_never_makes_more_full_compactions_on_the_demo(
    capsys: pytest.CaptureFixture[str], demo: Path
) -> None:
    thresholds = [2000, 3000, 4000, 6000, 9000, 12000, 30000]
    for micro in ("spec", "cache-friendly"):
        spec = ",".join(f"micro={micro}+threshold={t}" for t in thresholds)
        fulls = [s["summary"]["full"] for s in compare(capsys, demo, spec)["settings"]]
        assert fulls == sorted(fulls, reverse=True), (micro, fulls)
        assert fulls[0] > 0 and fulls[-1] == 0


def _cost(turns: list[dict[str, Any]], write: float, read: float, output: float) -> float:
    """The cost of a setting recomputed from its turns, apart from the code under test."""
    total = 0.0
    for t in turns:
        cache = t["cache"]
        assert cache["read"] + cache["written"] + cache["uncached"] == t["tokens_after"]
        total += cache["uncached"] + cache["written"] * write + cache["read"] * read
        total += t["summary_input_tokens"] + t["summary_output_tokens"] * output
    return total


@pytest.mark.parametrize("prices", [(1.25, 0.1, 5.0), (2.0, 0.0, 1.0), (1.0, 1.0, 0.0)], ids=str)
def test_the_costs_follow_from_the_turns_and_the_prices(
    capsys: pytest.CaptureFixture[str], demo: Path, prices: tuple[float, float, float]
) -> None:
    write, read, output = prices
    report = compare(
        capsys, demo, "default,cache-friendly,threshold=3000",
        "--cache-write-price", str(write), "--cache-read-price", str(read),
        "--output-price", str(output),
    )  # fmt: skip
    first = None
    for setting in report["settings"]:
        summary, turns = setting["summary"], setting["turns"]
        cost = _cost(turns, write, read, output)
        assert summary["cost"] == pytest.approx(cost, abs=0.1)
        sent = [t["tokens_after"] for t in turns]
        assert summary["peak_context"] == max(sent)
        assert summary["mean_context"] == pytest.approx(sum(sent) / len(sent), abs=0.1)
        reads = sum(t["cache"]["read"] for t in turns)
        assert summary["cache_read_share"] == pytest.approx(reads / sum(sent), abs=1e-4)
        assert summary["full"] == sum(t["action"] == "full" for t in turns)
        first = cost if first is None else first
        assert summary["vs_first"] == pytest.approx(cost / first, abs=1e-3)
    calls = [s["summary"]["summary_calls"] for s in report["settings"]]
    inputs = [s["summary"]["summary_input_tokens"] for s in report["settings"]]
    assert all((c > 0) == (i > 0) for c, i in zip(calls, inputs, strict=True))


def test_equal_prices_make_the_cost_the_input_sent_plus_the_summaries(
    capsys: pytest.CaptureFixture[str], demo: Path
) -> None:
    report = compare(
        capsys, demo, "default", "--cache-write-price", "1", "--cache-read-price", "1",
        "--output-price", "1",
    )  # fmt: skip
    summary = report["settings"][0]["summary"]
    expected = summary["input_tokens"] + summary["summary_input_tokens"]
    assert summary["cost"] == pytest.approx(expected + summary["summary_output_tokens"], abs=0.1)


def test_compare_prints_a_table_and_draws_a_line_per_setting(
    capsys: pytest.CaptureFixture[str], demo: Path, tmp_path: Path
) -> None:
    svg = tmp_path / "compare.svg"
    spec = "default,cache-friendly,threshold=9000"
    code, out, err = run(
        capsys, "replay", str(demo), "--threshold", DEMO_THRESHOLD, "--compare", spec,
        "--plot", str(svg),
    )  # fmt: skip
    assert code == 0, err
    header = next(line for line in out.splitlines() if line.startswith("setting"))
    for column in ("full", "calls", "peak", "mean", "cache read", "cost", "vs first"):
        assert column in header
    rows = out.splitlines()[out.splitlines().index(header) + 1 :][:3]
    assert [r.split()[0] for r in rows] == spec.split(",")
    root = ET.parse(svg).getroot()
    lines = [e for e in root.iter() if e.get("class") == "setting"]
    assert len(lines) == 3
    thresholds = {e.get("data-tokens") for e in root.iter() if e.get("class") == "threshold"}
    assert thresholds == {"6000", "9000"}


def test_the_summary_requests_of_a_command_are_priced(
    capsys: pytest.CaptureFixture[str], demo: Path
) -> None:
    command = f"{shlex.quote(sys.executable)} -c \"print('S ' * 400)\""
    report = compare(capsys, demo, "default,threshold=3000", "--provider-cmd", command)
    for setting in report["settings"]:
        summary = setting["summary"]
        each = quarters_to_tokens(text_quarters(("S " * 400).strip()))
        assert summary["summary_output_tokens"] == each * summary["summary_calls"] > 0
        assert summary["summary_cost"] == pytest.approx(
            summary["summary_input_tokens"] + 5 * summary["summary_output_tokens"], abs=0.1
        )


def _priced(turns: list[dict[str, Any]], price: dict[str, float]) -> float:
    """A setting's cost at ``price`` per million tokens, recomputed from its turns."""
    total = 0.0
    for t in turns:
        cache = t["cache"]
        total += cache["uncached"] * price["input"] + cache["written"] * price["cache_write"]
        total += cache["read"] * price["cache_read"]
        summary_uncached = (
            t["summary_input_tokens"] - t["summary_cache_read"] - t["summary_cache_written"]
        )
        total += summary_uncached * price["input"] + t["summary_output_tokens"] * price["output"]
        total += t["summary_cache_read"] * price["cache_read"]
        total += t["summary_cache_written"] * price["cache_write"]
    return total / 1_000_000


SONNET = {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75}


@pytest.mark.parametrize("given", ["inline", "file", "input only"])
def test_a_price_table_per_million_tokens_prices_every_setting_summaries_included(
    capsys: pytest.CaptureFixture[str], demo: Path, tmp_path: Path, given: str
) -> None:
    table = ",".join(f"{key}={value:g}" for key, value in SONNET.items())
    if given == "file":
        path = tmp_path / "prices.json"
        path.write_text(json.dumps(SONNET), encoding="utf-8")
        table = str(path)
    elif given == "input only":  # the rest at Anthropic's shares of it
        table = "input=3"
    report = compare(capsys, demo, "default,threshold=3000", "--prices", table)
    assert report["prices"] == {**SONNET, "per_million": True}
    for setting in report["settings"]:
        summary, turns = setting["summary"], setting["turns"]
        assert summary["summary_calls"] > 0 and summary["summary_input_tokens"] > 0
        assert summary["cost"] == pytest.approx(_priced(turns, SONNET), abs=1e-5)
        summaries = (
            summary["summary_input_tokens"] * 3.0 + summary["summary_output_tokens"] * 15.0
        ) / 1_000_000  # the offline summariser's requests read nothing from a cache
        assert summary["summary_cost"] == pytest.approx(summaries, abs=1e-5)
        assert summary["cost"] > summary["request_cost"] > 0


def test_the_table_with_a_price_table_shows_the_costs_in_its_currency(
    capsys: pytest.CaptureFixture[str], demo: Path
) -> None:
    argv = ["replay", str(demo), "--threshold", DEMO_THRESHOLD, "--compare", "default"]
    code, out, err = run(capsys, *argv, "--prices", "input=3,output=15")
    assert code == 0, err
    row = next(line for line in out.splitlines() if line.startswith("default"))
    assert re.search(r"\d\.\d\d +\d\.\d\d +1\.00x$", row), row
    assert "at these prices per million tokens (input 3," in out
    assert "output 15)" in out


@pytest.mark.parametrize(
    "table",
    ["", "input", "output=15", "input=3,input=4", "input=-1", "input=abc", "colour=3,input=1",
     "/no/such/prices.json"],
)  # fmt: skip
def test_a_bad_price_table_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], demo: Path, table: str
) -> None:
    code, out, err = run(capsys, "replay", str(demo), "--compare", "default", "--prices", table)
    assert code == 2 and out == ""
    assert "--prices" in err


def test_a_price_table_and_a_price_flag_together_are_refused(
    capsys: pytest.CaptureFixture[str], demo: Path
) -> None:
    code, out, err = run(
        capsys, "replay", str(demo), "--compare", "default", "--prices", "input=3",
        "--output-price", "4",
    )  # fmt: skip
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "--prices cannot be combined" in err


@pytest.mark.parametrize(
    "spec",
    [
        "", ",", "default,,cache-friendly", "default,default", "fast", "threshold",
        "threshold=abc", "threshold=-5", "micro=weird", "pin-facts=maybe", "language=fr",
        "colour=blue", "default+size=3", "max-message-tokens=lots", "max-message-tokens=50",
        "max-message-tokens=off", ",".join(f"threshold={n}000" for n in range(1, 10)),
    ],
)  # fmt: skip
def test_bad_compare_grammar_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], demo: Path, tmp_path: Path, spec: str
) -> None:
    svg = tmp_path / "c.svg"
    code, out, err = run(capsys, "replay", str(demo), "--compare", spec, "--plot", str(svg))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "--compare" in err
    assert not svg.exists()


# -- the prompt-cache model -------------------------------------------------------------


def _message(n: int) -> dict[str, Any]:
    return {"role": "user" if n % 2 else "assistant", "content": f"message {n} " * 200}


def test_the_cache_reads_the_longest_prefix_an_earlier_request_ended_at() -> None:
    cache = PromptCache(min_tokens=0)
    history = [_message(n) for n in range(6)]
    first = cache.request(history[:2], estimate_tokens(history[:2]))
    assert first.read == 0 and first.written == estimate_tokens(history[:2])
    grown = cache.request(history[:4], estimate_tokens(history[:4]))
    assert grown.read == estimate_tokens(history[:2])
    assert grown.read + grown.written == estimate_tokens(history[:4])
    # A change to the second message (a truncated result) breaks every prefix past it.
    changed = [history[0], {"role": "user", "content": "[cleared]"}, *history[2:6]]
    after = cache.request(changed, estimate_tokens(changed))
    assert after.read == 0  # no earlier request ended at message 0 alone
    again = cache.request(changed, estimate_tokens(changed))
    assert again.read == estimate_tokens(changed) and again.written == 0


def test_a_request_under_the_minimum_is_not_cached() -> None:
    cache = PromptCache(min_tokens=10_000)
    history = [_message(n) for n in range(2)]
    use = cache.request(history, estimate_tokens(history))
    assert (use.read, use.written, use.uncached) == (0, 0, estimate_tokens(history))
    assert cache.request(history, estimate_tokens(history)).read == 0


def test_peak_means_the_same_in_replay_and_in_the_compare_table(
    capsys: pytest.CaptureFixture[str], demo: Path
) -> None:
    code, out, err = run(capsys, "replay", str(demo), "--threshold", DEMO_THRESHOLD, "--json")
    assert code == 0, err
    plain = json.loads(out)
    sent = [t["tokens_after"] for t in plain["turns"]]
    assert plain["summary"]["peak_tokens"] == max(sent)
    assert plain["turns"][plain["summary"]["peak_turn"] - 1]["tokens_after"] == max(sent)
    assert max(t["tokens_in"] for t in plain["turns"]) > max(sent)  # they differ here
    report = compare(capsys, demo, "default")
    assert report["settings"][0]["summary"]["peak_context"] == plain["summary"]["peak_tokens"]


# -- the summary requests' reported usage -------------------------------------------------


def test_the_summary_requests_reported_cache_reads_are_priced_as_cache_reads() -> None:
    usage = {"input_tokens": 100, "cache_read_input_tokens": 8_000,
             "cache_creation_input_tokens": 400, "output_tokens": 50}

    def cached(prompt: list[dict[str, Any]]) -> str:
        return SummaryText("Summary: the work so far.", usage)

    done = replay(scripted_history(), cached, threshold=3000)
    compacted = [t for t in done.turns if t.summary_calls]
    assert compacted
    for turn in compacted:  # what the provider reported, not the estimate
        assert turn.summary_input_tokens == 8_500 * turn.summary_calls
        assert turn.summary_cache_read == 8_000 * turn.summary_calls
        assert turn.summary_cache_written == 400 * turn.summary_calls
        assert turn.summary_output_tokens == 50 * turn.summary_calls
    calls = done.summary_calls
    row = figures(done, Prices())
    assert row["summary_cache_read"] == 8_000 * calls
    assert row["summary_cost"] == pytest.approx(
        calls * (100 + 8_000 * 0.1 + 400 * 1.25 + 50 * 5.0), abs=0.1
    )


def test_the_offline_summariser_reports_the_estimated_summary_tokens() -> None:
    done = replay(scripted_history(), OfflineSummarizer(), threshold=3000)
    compacted = [t for t in done.turns if t.summary_calls]
    assert compacted
    assert all(t.summary_input_tokens > 0 and t.summary_output_tokens > 0 for t in compacted)
    assert all(t.summary_cache_read == t.summary_cache_written == 0 for t in compacted)
