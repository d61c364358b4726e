"""A 40-model-call Pydantic AI session compacted by compaction_processor, checked
against Anthropic's request rules.

The session runs through ``Agent.run_sync`` with a ``FunctionModel`` that plays
Claude: signed ``ThinkingPart``s with ``provider_name="anthropic"`` before its tool
calls, one parallel pair of calls, large tool results, four runs of ten model
calls joined by ``message_history``. Every request the model receives is checked
as Anthropic would (each tool call answered in the next user turn, no result
without its call, the thinking of the turn being continued sent with its
signature, every signed thinking part unaltered and of the ``anthropic`` provider,
no empty turn); a request breaking a rule counts as refused. The processor's every
output is compared with its input: a message that is not the same object and not
the library's summary or acknowledgement has each field other than the edited
content compared with its original (fields lost).

    python benchmarks/frameworks/pydantic_ai_session.py [--threshold N] [--json]
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import sys
from dataclasses import dataclass, field
from importlib.metadata import version
from typing import Any

from pydantic_ai import Agent, RunContext
from pydantic_ai import messages as pm
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from bareagent_compact import Compactor, estimate_tokens
from bareagent_compact.integrations.pydantic_ai import compaction_processor, is_summary, to_dicts
from bareagent_compact.integrations.pydantic_ai._from_dicts import MARK

RUNS = 4
CALLS_PER_RUN = 10
PARALLEL_AT = (0, 3)
"""(run, call) where the model asks for two tools at once."""
BUILTIN_NONE = (
    "pydantic-ai-slim has none a test model runs (AnthropicCompaction and OpenAICompaction "
    "compact on the provider's servers); Pydantic AI Harness is not installed"
)
WIRING_LINES = 5
"""The user's lines: three imports, the compactor, ``capabilities=[...]``."""


def tool_output(name: str, argument: str, size: int = 4000) -> str:
    """A deterministic tool result of about ``size`` characters."""
    lines, k = [], 0
    while sum(len(line) + 1 for line in lines) < size:
        digest = hashlib.sha256(f"{name}:{argument}:{k}".encode()).hexdigest()[:24]
        lines.append(f"{k:4d}  {name}({argument}) -> value_{digest} ok")
        k += 1
    return "\n".join(lines)


@dataclass
class Rules:
    """Anthropic's rules on one request, and what broke them."""

    signatures: dict[str, str] = field(default_factory=dict)
    """Each signature the model issued, with the thinking it signs."""
    refused: list[str] = field(default_factory=list)
    requests: int = 0
    peak_tokens: int = 0

    def check(self, messages: list[pm.ModelMessage]) -> str | None:
        """Why Anthropic would refuse ``messages``, else ``None``."""
        turns = _turns(messages)
        if not turns or turns[0][0] != "user":
            return "the first turn is not a user turn"
        for k, (role, parts) in enumerate(turns):
            if not parts:
                return f"turn {k} ({role}) is empty"
            if role == "assistant":
                after = turns[k + 1][1] if k + 1 < len(turns) else []
                answered = {p.tool_call_id for p in after if _is_result(p)}
                for part in parts:
                    if isinstance(part, pm.ThinkingPart) and (error := self._thinking(part)):
                        return f"turn {k}: {error}"
                    if isinstance(part, pm.ToolCallPart) and part.tool_call_id not in answered:
                        return f"turn {k}: tool call {part.tool_call_id} is not answered"
            else:
                calls = (
                    {p.tool_call_id for p in turns[k - 1][1] if isinstance(p, pm.ToolCallPart)}
                    if k else set()
                )
                for part in parts:
                    if _is_result(part) and part.tool_call_id not in calls:
                        return f"turn {k}: result {part.tool_call_id} has no call before it"
        last_assistant = next((p for r, p in reversed(turns) if r == "assistant"), None)
        if last_assistant and any(isinstance(p, pm.ToolCallPart) for p in last_assistant):
            first = last_assistant[0]
            if not (isinstance(first, pm.ThinkingPart) and _sent_as_thinking(first)):
                return "the continued tool-use turn does not start with its signed thinking"
        return None

    def _thinking(self, part: pm.ThinkingPart) -> str | None:
        if part.signature is None or part.provider_name != "anthropic":
            return None  # not sent as thinking (Pydantic AI drops or rewrites it)
        if self.signatures.get(part.signature) != part.content:
            return "a signed thinking block was altered"
        return None


def _sent_as_thinking(part: pm.ThinkingPart) -> bool:
    return part.provider_name == "anthropic" and part.signature is not None


def _is_result(part: object) -> bool:
    return isinstance(part, pm.ToolReturnPart) or (
        isinstance(part, pm.RetryPromptPart) and part.tool_name is not None
    )


def _turns(messages: list[pm.ModelMessage]) -> list[tuple[str, list[Any]]]:
    """The turns Anthropic receives: consecutive messages of one role merged, system
    prompt parts taken apart."""
    turns: list[tuple[str, list[Any]]] = []
    for message in messages:
        role = "assistant" if isinstance(message, pm.ModelResponse) else "user"
        parts = [p for p in message.parts if not isinstance(p, pm.SystemPromptPart)]
        if role == "user" and not parts:
            continue
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(parts)
        else:
            turns.append((role, list(parts)))
    return turns


class FakeClaude:
    """The FunctionModel's function: checks each request, then answers from a script."""

    def __init__(self) -> None:
        self.rules = Rules()
        self.calls = 0

    def __call__(self, messages: list[pm.ModelMessage], info: AgentInfo) -> pm.ModelResponse:
        rules = self.rules
        rules.requests += 1
        tokens = estimate_tokens(to_dicts(messages).dicts) + 200  # tools and instructions
        rules.peak_tokens = max(rules.peak_tokens, tokens)
        error = rules.check(messages)
        if error is not None:
            rules.refused.append(error)
        run, call = divmod(self.calls, CALLS_PER_RUN)
        self.calls += 1
        thought = f"Run {run}, step {call}: what I know so far points at the next file."
        signature = hashlib.sha256(thought.encode()).hexdigest()
        rules.signatures[signature] = thought
        parts: list[pm.ModelResponsePart] = [
            pm.ThinkingPart(thought, signature=signature, provider_name="anthropic")
        ]
        if call == CALLS_PER_RUN - 1:
            parts.append(pm.TextPart(f"Run {run} done: the cause is in module_{run}."))
        else:
            parts.append(pm.ToolCallPart("read_file", {"path": f"src/m{run}_{call}.py"},
                                         tool_call_id=f"toolu_{run}_{call}a"))
            if (run, call) == PARALLEL_AT:
                parts.append(pm.ToolCallPart("search_logs", {"query": f"error {run}"},
                                             tool_call_id=f"toolu_{run}_{call}b"))
        return pm.ModelResponse(
            parts, usage=RequestUsage(input_tokens=tokens, output_tokens=60),
            provider_name="anthropic", provider_response_id=f"msg_{run}_{call}",
            provider_details={"stop_reason": "end_turn" if len(parts) == 2 else "tool_use"},
            finish_reason="stop",
        )


_EDITABLE = {"content", "args"}


def fields_lost(original: Any, returned: Any) -> int:
    """How many fields of ``original`` ``returned`` lost or changed, the edited content
    (a part's ``content``, a call's ``args``) and the parts list itself aside."""
    lost = 0
    for f in dataclasses.fields(original):
        if f.name in _EDITABLE or f.name == "parts":
            continue
        if getattr(original, f.name) != getattr(returned, f.name, object()):
            lost += 1
    if hasattr(original, "parts"):
        for part in returned.parts:
            twin = _twin(original.parts, part)
            lost += 1 if twin is None else (0 if twin is part else fields_lost(twin, part))
    return lost


def _twin(parts: Any, part: Any) -> Any:
    """The part of ``parts`` that ``part`` was made from."""
    for candidate in parts:
        if candidate is part:
            return candidate
    for candidate in parts:
        same_kind = type(candidate) is type(part)
        key = getattr(part, "tool_call_id", None) or getattr(part, "signature", None)
        if same_kind and key and key in (getattr(candidate, "tool_call_id", None),
                                         getattr(candidate, "signature", None)):
            return candidate
    return next((c for c in parts if type(c) is type(part)), None)


@dataclass
class Watch:
    """The processor wrapped: each output compared with its input."""

    unchanged: int = 0
    edited: int = 0
    new: int = 0
    lost: int = 0

    def compare(self, before: list[pm.ModelMessage], after: list[pm.ModelMessage]) -> None:
        ids = {id(m) for m in before}
        for message in after:
            if id(message) in ids:
                self.unchanged += 1
            elif (message.metadata or {}).get(MARK):
                self.new += 1
            else:
                self.edited += 1
                self.lost += fields_lost(_original(before, message), message)


def _original(before: list[pm.ModelMessage], message: pm.ModelMessage) -> pm.ModelMessage:
    return next(m for m in before if type(m) is type(message) and m.timestamp == message.timestamp)


def _drive(agent: Agent[None, str]) -> list[pm.ModelMessage]:
    """The session's four runs on ``agent`` (its tools added here)."""

    @agent.tool_plain
    def read_file(path: str) -> str:
        return tool_output("read_file", path)

    @agent.tool_plain
    def search_logs(query: str) -> str:
        return tool_output("search_logs", query)

    history: list[pm.ModelMessage] = []
    for run in range(RUNS):
        result = agent.run_sync(f"Task {run}: find why workers time out.", message_history=history)
        history = result.all_messages()
    return history


BUILTIN_SETTINGS: tuple[dict[str, int], ...] = ({}, {"keep_messages": 6}, {"keep_messages": 2})
"""The ``SummarizingCompaction`` settings tried: its defaults, then fewer messages kept."""


def run_builtin(threshold: int = 4000) -> dict[str, Any] | None:
    """The same session compacted by Pydantic AI Harness's ``SummarizingCompaction``
    (``max_tokens=threshold``, each of ``BUILTIN_SETTINGS``), when that package is
    importable; its fewest summary calls."""
    try:
        from pydantic_ai_harness.compaction import SummarizingCompaction  # noqa: PLC0415
    except ImportError:
        return None
    rows = []
    for settings in BUILTIN_SETTINGS:
        summaries: list[int] = []

        def summarise(messages: list[pm.ModelMessage], info: AgentInfo,
                      summaries: list[int] = summaries) -> pm.ModelResponse:
            summaries.append(len(messages))
            return pm.ModelResponse([pm.TextPart("Summary: files read so far, causes found.")])

        fake = FakeClaude()
        capability = SummarizingCompaction(
            model=FunctionModel(summarise), max_tokens=threshold, **settings
        )
        _drive(Agent(FunctionModel(fake, model_name="claude-fake"),
                     system_prompt="You investigate.", capabilities=[capability]))
        rows.append({"settings": settings, "summary_calls": len(summaries),
                     "refused": len(fake.rules.refused),
                     "peak_request_tokens": fake.rules.peak_tokens})
    best = min(rows, key=lambda row: row["summary_calls"])
    return {**best, "tried": rows, "version": version("pydantic-ai-harness")}


def run_session(threshold: int = 4000, *, with_builtin: bool = True) -> dict[str, Any]:
    """Run the session; its row of figures."""
    summaries: list[int] = []

    def summarise(prompt: list[dict[str, Any]]) -> str:
        summaries.append(len(prompt))
        return f"Summary {len(summaries)}: files read so far, causes found in earlier runs."

    # -- the user's wiring: these 5 lines (imports included) --
    compactor = Compactor(provider=summarise, threshold=threshold, language="en")
    watch = Watch()
    processor = compaction_processor(compactor)

    def watched(ctx: RunContext[Any], messages: list[pm.ModelMessage]) -> list[pm.ModelMessage]:
        out = processor(ctx, messages)
        assert isinstance(out, list)
        watch.compare(messages, out)
        return out

    builtin = run_builtin(threshold) if with_builtin else None
    fake = FakeClaude()
    agent = Agent(FunctionModel(fake, model_name="claude-fake"), system_prompt="You investigate.",
                  capabilities=[ProcessHistory(watched)])
    history = _drive(agent)
    return {
        "framework": "pydantic-ai",
        "user_lines": WIRING_LINES,
        "model_calls": fake.rules.requests,
        "refused": len(fake.rules.refused),
        "refusals": fake.rules.refused[:3],
        "fields_lost": watch.lost,
        "messages_kept_whole": watch.unchanged,
        "messages_edited": watch.edited,
        "summary_calls": len(summaries),
        "summary_calls_builtin": None if builtin is None else builtin["summary_calls"],
        "builtin": BUILTIN_NONE if builtin is None else (
            f"Pydantic AI Harness {builtin['version']} SummarizingCompaction"
            f"({builtin['settings'] or 'defaults'})"),
        "builtin_runs": None if builtin is None else builtin["tried"],
        "peak_request_tokens": fake.rules.peak_tokens,
        "summaries_in_history": sum(1 for m in history if is_summary(m)),
        "threshold": threshold,
        "versions": {name: version(name) for name in ("pydantic-ai-slim", "bareagent-compact")},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threshold", type=int, default=4000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    row = run_session(args.threshold)
    if args.json:
        print(json.dumps(row))
        return 0
    print("framework    user lines  fields lost  refused  summary calls vs built-in  peak tokens")
    print(f"{row['framework']:<12} {row['user_lines']:>10}  {row['fields_lost']:>11}  "
          f"{row['refused']:>7}  {row['summary_calls']:>5} vs {row['summary_calls_builtin']}"
          f"  {row['peak_request_tokens']:>11}")
    print(f"built-in: {row['builtin']}")
    for run in row["builtin_runs"] or ():
        print(f"  SummarizingCompaction{run['settings']}: {run['summary_calls']} summary calls, "
              f"{run['refused']} refused, peak {run['peak_request_tokens']} tokens")
    print(f"model calls {row['model_calls']}, messages kept whole {row['messages_kept_whole']}, "
          f"edited {row['messages_edited']}; versions {row['versions']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
