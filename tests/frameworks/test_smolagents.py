"""The smolagents integration: converters, fields kept, micro-compaction, and a
40-call ToolCallingAgent session driven by a checking fake model."""

from __future__ import annotations

import importlib.util
import runpy
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytest.importorskip("smolagents")

from smolagents.memory import ActionStep, TaskStep, ToolCall
from smolagents.monitoring import Timing, TokenUsage

from bareagent_compact import Compactor
from bareagent_compact.integrations.smolagents import (
    CompactingMemory,
    SummaryStep,
    rebuild_steps,
    steps_to_messages,
)
from bareagent_compact.micro import is_truncated

ROOT = Path(__file__).resolve().parents[2]


def _session() -> ModuleType:
    path = ROOT / "benchmarks" / "frameworks" / "smolagents_session.py"
    spec = importlib.util.spec_from_file_location("smolagents_session", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _action(n: int, calls: list[str], observations: str) -> ActionStep:
    return ActionStep(
        step_number=n, timing=Timing(start_time=1.0, end_time=2.0),
        tool_calls=[ToolCall(name="read_file", arguments={"path": c}, id=c) for c in calls],
        model_output="looking", observations=observations,
        token_usage=TokenUsage(input_tokens=10, output_tokens=2),
    )  # fmt: skip


def test_an_action_step_reads_as_a_tool_call_and_its_results_with_the_call_ids() -> None:
    step = _action(1, ["c1", "c2"], "one\ntwo")
    conv = steps_to_messages("be brief", [TaskStep(task="go"), step])
    assert conv.messages[0] == {"role": "system", "content": [{"type": "text", "text": "be brief"}]}
    task = {"role": "user", "content": [{"type": "text", "text": "New task:\ngo"}]}
    assert conv.messages[1] == task
    call, first, second = conv.messages[2:]
    assert call["role"] == "assistant" and [c["id"] for c in call["tool_calls"]] == ["c1", "c2"]
    assert call["tool_calls"][0]["function"] == {"name": "read_file", "arguments": '{"path": "c1"}'}
    assert first == {"role": "tool", "tool_call_id": "c1", "content": "one\ntwo"}
    assert second["tool_call_id"] == "c2" and "c1" in second["content"]
    assert conv.spans == [(1, 2), (2, 5)]


def test_an_error_step_reads_as_smolagents_words_it() -> None:
    step = ActionStep(step_number=1, timing=Timing(start_time=1.0), error=None)
    step.error = __import__("smolagents.utils", fromlist=["AgentError"]).AgentError(
        "boom", __import__("smolagents.monitoring", fromlist=["AgentLogger"]).AgentLogger(0)
    )
    (message,) = steps_to_messages(None, [step]).messages
    assert message["role"] == "user" and "Error:\nboom" in message["content"][0]["text"]


def test_a_truncated_observation_is_written_back_and_other_steps_stay_the_same_objects() -> None:
    steps: list[Any] = [TaskStep(task="go")]
    steps += [_action(n, [f"c{n}"], f"result {n} " + "x" * 4000) for n in range(1, 7)]
    fields = {id(s): dict(vars(s)) for s in steps}
    conv = steps_to_messages("sys", steps)
    out, result = Compactor(lambda p: "S", threshold=100_000).compacted(conv.messages)
    assert result.truncated > 0
    rebuilt = rebuild_steps(conv, steps, list(out), result.compacted, "ok")
    assert rebuilt is not None and all(a is b for a, b in zip(rebuilt, steps, strict=True))
    truncated = [s for s in steps[1:] if is_truncated(s.observations)]
    assert 0 < len(truncated) < 6
    for step in steps:
        changed = {k for k, v in vars(step).items() if v is not fields[id(step)][k]}
        assert changed <= ({"observations"} if step in truncated else set())


def test_a_full_compaction_puts_one_summary_step_in_place_of_the_old_steps() -> None:
    steps: list[Any] = [TaskStep(task="go")]
    steps += [_action(n, [f"c{n}"], f"result {n} " + "y" * 3000) for n in range(1, 7)]
    conv = steps_to_messages("sys", steps)
    out, result = Compactor(lambda p: "S", threshold=500).compacted(conv.messages)
    assert result.compacted
    rebuilt = rebuild_steps(conv, steps, list(out), True, "ok")
    assert rebuilt is not None and isinstance(rebuilt[0], SummaryStep)
    assert rebuilt[-1] is steps[-1] and len(rebuilt) < len(steps)
    (user, *rest) = rebuilt[0].to_messages()
    assert user.content == [{"type": "text", "text": rebuilt[0].task}]
    assert rebuilt[0].task.startswith("[Context Compressed]")
    assert all(isinstance(m.content, list) for m in rest)


def test_a_compacting_memory_needs_a_sync_compactor() -> None:
    with pytest.raises(TypeError, match="CompactingMemory needs a Compactor"):
        CompactingMemory(None, object())  # type: ignore[arg-type]


def test_the_session_has_no_refused_request_no_lost_field_and_few_summaries() -> None:
    row = _session().run_session()
    assert row["model_calls"] == 40
    assert row["refused"] == 0, row["refusals"]
    assert row["fields_lost"] == 0
    assert row["user_lines"] <= 5
    assert 1 <= row["summary_calls"] <= 3
    assert row["peak_request_tokens"] < 6000


def test_micro_compaction_of_old_observations_saves_full_compactions() -> None:
    session = _session()
    with_micro = session.run_session()["summary_calls"]
    without = session.run_session(keep_recent=1000)["summary_calls"]
    assert with_micro < without


def test_smolagents_steps_given_to_a_plain_compactor_name_compacting_memory() -> None:
    with pytest.raises(TypeError, match="CompactingMemory"):
        Compactor(lambda p: "S")([{"role": "user", "content": "a"}, TaskStep(task="x")])


def test_the_offline_example_runs_through_the_agent(capsys: pytest.CaptureFixture[str]) -> None:
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        runpy.run_path(str(ROOT / "examples" / "smolagents_agent.py"), run_name="__main__")
    finally:
        sys.path.remove(str(ROOT / "examples"))
    assert "40 model calls, 0 refused" in capsys.readouterr().out


def test_given_in_step_callbacks_it_compacts_the_agent_it_is_called_for() -> None:
    example = _session().smolagents_agent
    model = example.ScriptedModel(per_run=10)
    compactor = Compactor(example.summarise, threshold=5000, language="en")
    agent = example.ToolCallingAgent(
        tools=[example.read_file], model=model, verbosity_level=0,
        step_callbacks=[CompactingMemory(compactor=compactor, session_id="mine")],
    )  # fmt: skip
    agent.run("Read the files.", max_steps=12)
    assert model.calls == 10 and not model.refused
    truncated = [s for s in agent.memory.steps if is_truncated(getattr(s, "observations", None))]
    assert truncated


def test_the_session_script_prints_its_row_as_a_plain_script() -> None:
    script = ROOT / "benchmarks" / "frameworks" / "smolagents_session.py"
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, check=True, timeout=300
    )
    row = done.stdout.splitlines()[-1].split(" | ")
    assert row[0] == "smolagents" and row[1:5] == ["40", "2", "0", "0"]


def test_the_fake_model_refuses_str_content_and_an_observation_without_its_call() -> None:
    example = _session().smolagents_agent
    models = pytest.importorskip("smolagents.models")
    role = models.MessageRole
    system = models.ChatMessage(role=role.SYSTEM, content=[{"type": "text", "text": "s"}])
    summary = models.ChatMessage(role=role.USER, content="[Context Compressed]\nS")
    orphan = models.ChatMessage(
        role=role.TOOL_RESPONSE, content=[{"type": "text", "text": "Observation:\nx"}]
    )
    model = example.ScriptedModel()
    model.generate([system, summary, models.ChatMessage(role=role.USER, content="go")])
    model.generate([system, orphan])
    assert len(model.refused) == 2
    assert "not text blocks" in model.refused[0] and "without its call" in model.refused[1]
