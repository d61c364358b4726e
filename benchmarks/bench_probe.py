"""What stays word for word over 5 rolling compactions: the default against
``profile="agent"``.

Run ``python benchmarks/bench_probe.py`` (``--json`` for the figures as JSON).
A probe conversation plants, each round, in English and in Chinese: standing
rules, hard constraints, preferences, the user's current task, file paths, URLs,
error lines and numbers (ticket ids in the user's turns, exit codes in the error
lines). Each round is a user turn in each language, three tool calls in all
whose results hold the paths, URLs and errors among filler lines (one error in
the middle of a 4,000-character line), the assistant's closing words, and a
short "go on"; then a forced compaction (rolling: the previous summary is part
of the next source). Three results a round, so that micro-compaction
(``keep_recent=3``) leaves every planted result whole for the compaction to
read: what it truncated before is kept by its marker and recall handle, not by
the summary. Two summarisers: one that keeps
nothing ("Work is going on.") and one that keeps only the last paragraph of the
transcript it is sent.

Reported per kind and round: the share of what was planted so far (for the task:
the current one) still in the history word for word; what the kept user turns
and the pinned block take together, as a share of the threshold; and how many
planted items the library's additions (turns and pins) hold more than once.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bareagent_compact import Compactor, estimate_tokens
from bareagent_compact.prompts import SUMMARY_PREFIX

THRESHOLD = 20_000
ROUNDS = 5
KINDS = ("rules", "constraints", "preferences", "task", "paths", "urls", "errors", "numbers")

RULES = [
    ("Never push to the main branch.", "禁止使用 sudo 命令。"),
    ("Do not touch files under vendor/.", "不要修改测试文件。"),
    ("You must write a test for every fix.", "必须先运行 lint 再提交。"),
    ("Never delete a migration file.", "不得关闭任何告警规则。"),
    ("Always keep the public API stable.", "严禁在日志里打印密码。"),
]
CONSTRAINTS = [
    ("The budget cap is $500 this month.", "每个函数最多50行。"),
    ("Use at most 4 worker processes.", "重试最多3次。"),
    ("Each request may take no more than 800 ms.", "单个文件不超过400行。"),
    ("Keep memory under a limit of 2 GB.", "并发连接数上限为64。"),
    ("The disk quota is at most 20 GB.", "每天最多部署2次。"),
]
PREFERENCES = [
    ("I prefer short answers in bullet points.", "我更喜欢用中文写提交信息。"),
    ("I like tabs better than spaces in new files.", "回答时请先给结论。"),
    ("Please name branches after the ticket.", "我希望变量名用英文全称。"),
    ("I'd rather see diffs than whole files.", "代码注释我喜欢简短一些。"),
    ("Prefer pathlib over os.path where you can.", "测试名请写清楚行为。"),
]
TASKS = [
    ("Find why the nightly export job times out.", "请找出导出任务失败的原因。"),
    ("Add retries to the payment webhook client.", "请给支付回调加上重试。"),
    ("Speed up the search endpoint.", "请优化搜索接口的速度。"),
    ("Fix the flaky upload test.", "请修复不稳定的上传测试。"),
    ("Write the release notes for 2.14.", "请写出2.14版本的发布说明。"),
]
TICKETS = [(48213 + 7 * n, 90311 + 11 * n) for n in range(ROUNDS)]


@dataclass
class Planted:
    """What one round planted, by kind."""

    items: dict[str, list[str]] = field(default_factory=lambda: {kind: [] for kind in KINDS})


def _filler(tag: str, lines: int) -> list[str]:
    return [
        f"{tag} line {i}: processed batch {i % 7} of the queue, status ok" for i in range(lines)
    ]


def _tool_output(n: int, k: int, planted: Planted) -> str:
    """A tool result holding a path, a URL and an error line (some in the middle of a
    long line) among filler."""
    path = f"src/service_{n}/module_{k}/handler_{n}{k}.py"
    url = f"https://ci.example.com/builds/{7000 + 10 * n + k}"
    code = 131 + 4 * n + k
    error = f"ERROR: worker {n}.{k} exited with code {code} while reading the queue"
    planted.items["paths"].append(path)
    planted.items["errors"].append(error)
    planted.items["numbers"].append(str(code))
    lines = _filler(f"r{n}.{k}", 24)
    lines.insert(8, f"reading {path}")
    if k == 0:
        planted.items["urls"].append(url)
        lines.insert(12, f"see {url} for the full log")
    if (n + k) % 2:
        lines.insert(16, error)
    else:  # an error in the middle of a long line
        lines.insert(16, "trace: " + "frame " * 300 + error + " " + "frame " * 300)
    return "\n".join(lines)


def _turn(n: int, zh: bool, planted: Planted) -> str:
    which = 1 if zh else 0
    rule, limit = RULES[n][which], CONSTRAINTS[n][which]
    preference, task = PREFERENCES[n][which], TASKS[n][which]
    ticket = str(TICKETS[n][which])
    for kind, item in (("rules", rule), ("constraints", limit), ("preferences", preference)):
        planted.items[kind].append(item)
    planted.items["numbers"].append(ticket)
    if zh:
        return f"{task}工单号是 {ticket}。{rule}{limit}{preference}"
    return f"{task} The ticket is {ticket}. {rule} {limit} {preference}"


def round_messages(n: int, planted: Planted) -> tuple[list[dict[str, Any]], str]:
    """Round ``n``'s messages (Anthropic shape) and its current task."""
    messages: list[dict[str, Any]] = []
    for zh in (False, True):
        messages.append({"role": "user", "content": _turn(n, zh, planted)})
        for k in (0, 1) if not zh else (2,):
            use_id = f"toolu_{n}_{k}"
            path_arg = {"path": f"src/service_{n}/module_{k}"}
            messages.append(
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": use_id, "name": "read", "input": path_arg}
                    ],
                }
            )
            result = {
                "type": "tool_result",
                "tool_use_id": use_id,
                "content": _tool_output(n, k, planted),
            }
            messages.append({"role": "user", "content": [result]})
        closing = f"Part {int(zh)} of round {n} is done." + (
            f"\n\nNext: {TASKS[n][0]} (ticket {TICKETS[n][0]})" if zh else ""
        )
        messages.append({"role": "assistant", "content": closing})
    messages.append({"role": "user", "content": "ok, go on"})
    return messages, TASKS[n][1]


def keeps_nothing(prompt: Any) -> str:
    return "Work is going on."


def keeps_last_paragraph(prompt: Any) -> str:
    """The last paragraph of the transcript it is sent (a summariser that forgets the rest)."""
    paragraphs = [p for p in str(prompt[-1]["content"]).split("\n\n") if p.strip()]
    return paragraphs[-1].strip() if paragraphs else "Nothing."


SUMMARISERS: dict[str, Callable[[Any], str]] = {
    "keeps nothing": keeps_nothing,
    "keeps its last paragraph": keeps_last_paragraph,
}


@dataclass
class Round:
    """What one round left: per kind, (still there, planted so far); the turns and
    pins' share of the threshold; duplicates in them."""

    kept: dict[str, tuple[int, int]]
    added_share: float
    duplicates: int


def run_probe(
    summariser: Callable[[Any], str],
    *,
    profile: str | None,
    threshold: int = THRESHOLD,
    rounds: int = ROUNDS,
) -> list[Round]:
    """The probe through ``rounds`` forced rolling compactions."""
    summaries: list[str] = []

    def provider(prompt: Any) -> str:
        summaries.append(summariser(prompt))
        return summaries[-1]

    compactor = Compactor(provider, threshold=threshold, profile=profile)
    planted = Planted()
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    results = []
    for n in range(rounds):
        added, task = round_messages(n, planted)
        messages += added
        compactor(messages, force=True)
        strings = _strings(messages)
        kept = {}
        for kind in KINDS:
            items = [task] if kind == "task" else planted.items[kind]
            there = sum(any(item in text for text in strings) for item in items)
            kept[kind] = (there, len(items))
        extra = _added(messages, summaries[-1])
        share = estimate_tokens([{"role": "user", "content": extra}]) / threshold if extra else 0.0
        every = [item for kind in KINDS for item in planted.items[kind]]
        duplicates = sum(extra.count(item) > 1 for item in dict.fromkeys(every))
        results.append(Round(kept, share, duplicates))
    return results


def _strings(messages: list[dict[str, Any]]) -> list[str]:
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(messages)
    return found


def _added(messages: list[dict[str, Any]], summary: str) -> str:
    """What the library put beside the summary in its message: kept turns and pins."""
    for message in messages:
        content = message.get("content")
        if isinstance(content, str) and content.startswith(SUMMARY_PREFIX):
            body = content[len(SUMMARY_PREFIX) :]
            return body[len(summary) :] if body.startswith(summary) else body
    return ""


def table(threshold: int = THRESHOLD) -> dict[str, Any]:
    """Every figure of the probe: summariser -> setting -> rounds."""
    figures: dict[str, Any] = {}
    for name, summariser in SUMMARISERS.items():
        figures[name] = {
            setting: [
                {"kept": r.kept, "added_share": r.added_share, "duplicates": r.duplicates}
                for r in run_probe(summariser, profile=profile, threshold=threshold)
            ]
            for setting, profile in (("default", None), ("profile", "agent"))
        }
    return figures


def render(figures: dict[str, Any], threshold: int) -> str:
    lines = []
    header = " | ".join(str(n + 1) for n in range(ROUNDS))
    for name, settings in figures.items():
        lines += [f"\nSummariser that {name}, threshold {threshold:,}:\n"]
        lines += [f"| kind | setting | {header} |", "|---|---|" + "---|" * ROUNDS]
        for kind in KINDS:
            for setting, rounds in settings.items():
                cells = " | ".join("{}/{}".format(*r["kept"][kind]) for r in rounds)
                label = "default" if setting == "default" else '`profile="agent"`'
                lines.append(f"| {kind} | {label} | {cells} |")
        for setting, rounds in settings.items():
            label = "default" if setting == "default" else '`profile="agent"`'
            shares = " | ".join(f"{r['added_share']:.1%}" for r in rounds)
            dupes = " | ".join(str(r["duplicates"]) for r in rounds)
            lines.append(f"| turns + pins, share of threshold | {label} | {shares} |")
            lines.append(f"| duplicates | {label} | {dupes} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threshold", type=int, default=THRESHOLD)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    figures = table(args.threshold)
    if args.json:
        print(json.dumps(figures, indent=1))
    else:
        print(render(figures, args.threshold))
    return 0


if __name__ == "__main__":
    sys.exit(main())
