"""The OpenAI Agents SDK integration, run through the SDK's own Runner and a checking fake model."""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import RunConfig, Runner, set_tracing_disabled
from agents.memory import OpenAIResponsesCompactionSession, Session, SQLiteSession
from agents.run_config import CallModelData, ModelInputData

from bareagent_compact import AsyncCompactor, Compactor
from bareagent_compact.integrations.openai_agents import (
    CompactingSession,
    compaction_input_filter,
)

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks" / "frameworks"))

from _agents_session import (  # noqa: E402
    CheckingModel,
    CountingSummarizer,
    FakeCompactClient,
    make_agent,
    run_session,
    run_session_streamed,
    run_session_sync,
    summarised_twice,
)

THRESHOLD = 4_000


@pytest.fixture(autouse=True)
def _no_tracing() -> None:
    set_tracing_disabled(True)


def wired(compactor: Any, name: str = "user-1") -> tuple[CompactingSession, RunConfig]:
    session = CompactingSession(SQLiteSession(name), compactor)
    return session, RunConfig(call_model_input_filter=compaction_input_filter(compactor))


def builtin_summary_calls() -> int:
    client = FakeCompactClient()
    session = OpenAIResponsesCompactionSession(
        "builtin", SQLiteSession("builtin"), client=client,  # type: ignore[arg-type]
        compaction_mode="input",
    )
    asyncio.run(run_session(make_agent(CheckingModel()), session, None))
    return client.calls


def test_forty_call_session_is_never_refused_loses_no_field_and_summarises_each_part_once():
    summarizer = CountingSummarizer()
    compactor = Compactor(provider=summarizer, threshold=THRESHOLD)
    model = CheckingModel()
    session, config = wired(compactor)
    asyncio.run(run_session(make_agent(model), session, config))
    assert model.checks.calls == 40
    assert model.checks.refused == 0, model.checks.reasons
    assert model.checks.fields_lost == 0
    assert summarizer.calls >= 2  # full compactions happened
    assert summarised_twice(summarizer) == set()
    assert summarizer.calls <= builtin_summary_calls()


def test_run_sync_session_is_compacted_alike():
    summarizer = CountingSummarizer()
    compactor = Compactor(provider=summarizer, threshold=THRESHOLD)
    model = CheckingModel()
    session, config = wired(compactor)
    loop = asyncio.new_event_loop()  # run_sync runs on the thread's default loop: ours, closed
    asyncio.set_event_loop(loop)
    try:
        run_session_sync(make_agent(model), session, config)
    finally:
        asyncio.set_event_loop(None)
        loop.close()
    assert (model.checks.calls, model.checks.refused, model.checks.fields_lost) == (40, 0, 0)
    assert summarizer.calls >= 2
    assert summarised_twice(summarizer) == set()


def test_streamed_runs_are_compacted_alike():
    compactor = RecordingCompactor(provider=CountingSummarizer(), threshold=THRESHOLD)
    model = CheckingModel()
    session, config = wired(compactor)
    asyncio.run(run_session_streamed(make_agent(model), session, config))
    assert (model.checks.calls, model.checks.refused, model.checks.fields_lost) == (40, 0, 0)
    assert compactor.provider.calls >= 2
    assert summarised_twice(compactor.provider) == set()
    assert len(compactor.usages) == 40


def test_async_compactor_serves_both_pieces():
    summarizer = CountingSummarizer()
    compactor = AsyncCompactor(provider=summarizer, threshold=THRESHOLD)
    model = CheckingModel()
    session, config = wired(compactor)
    asyncio.run(run_session(make_agent(model), session, config))
    assert (model.checks.refused, model.checks.fields_lost) == (0, 0)
    assert summarizer.calls >= 2
    assert summarised_twice(summarizer) == set()


def naive_filter(compactor: Compactor) -> Any:
    """The obvious filter: compacts each call's list, remembering nothing."""

    def compaction_filter(data: Any) -> ModelInputData:
        items, _ = compactor.compacted(list(data.model_data.input))
        return ModelInputData(input=items, instructions=data.model_data.instructions)

    return compaction_filter


def test_filter_alone_never_summarises_a_part_twice_where_a_naive_filter_does():
    naive = CountingSummarizer()
    compactor = Compactor(provider=naive, threshold=3_000)
    asyncio.run(run_session(make_agent(CheckingModel()), SQLiteSession("naive"),
                            RunConfig(call_model_input_filter=naive_filter(compactor))))
    assert summarised_twice(naive)  # the comparison can fail

    ours = CountingSummarizer()
    compactor = Compactor(provider=ours, threshold=3_000)
    model = CheckingModel()
    asyncio.run(run_session(make_agent(model), SQLiteSession("ours"),
                            RunConfig(call_model_input_filter=compaction_input_filter(compactor))))
    assert ours.calls >= 1
    assert summarised_twice(ours) == set()
    assert ours.calls < naive.calls
    assert (model.checks.refused, model.checks.fields_lost) == (0, 0)


def test_session_alone_stores_the_history_compacted_between_runs():
    summarizer = CountingSummarizer()
    compactor = Compactor(provider=summarizer, threshold=3_000)
    store = SQLiteSession("alone")
    model = CheckingModel()
    asyncio.run(run_session(make_agent(model), CompactingSession(store, compactor), None))
    stored = asyncio.run(store.get_items())
    text = json.dumps(stored)
    assert summarizer.calls >= 1
    assert "Summary" in text
    assert "call_1_0" not in text  # the first run's tool call was summarised away
    assert (model.checks.refused, model.checks.fields_lost) == (0, 0)


class RecordingCompactor(Compactor):
    """Remembers every record_usage call."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.usages: list[tuple[list[Any], int]] = []

    def record_usage(self, messages: Any, usage: Any, **kwargs: Any) -> None:
        self.usages.append((list(messages), usage.input_tokens))
        super().record_usage(messages, usage, **kwargs)


def test_each_response_usage_is_recorded_with_the_list_that_was_sent():
    compactor = RecordingCompactor(provider=CountingSummarizer(), threshold=THRESHOLD)
    model = CheckingModel()
    session, config = wired(compactor)
    asyncio.run(run_session(make_agent(model), session, config))
    assert len(compactor.usages) == 40
    for sent, tokens in compactor.usages:
        assert tokens == len(json.dumps(sent, default=repr)) // 4  # the fake's size of it


def test_clear_session_forgets_and_empties_the_store():
    compactor = Compactor(provider=CountingSummarizer(), threshold=THRESHOLD)
    session, config = wired(compactor, "cleared")
    asyncio.run(run_session(make_agent(CheckingModel()), session, config))
    asyncio.run(session.clear_session())
    assert asyncio.run(session.get_items()) == []


def test_the_wrapper_is_a_session_of_the_sdk_protocol():
    session = CompactingSession(SQLiteSession("p"), Compactor(provider=CountingSummarizer()))
    assert isinstance(session, Session)
    assert session.session_id == "p"
    assert session.session_settings is session.session.session_settings


def test_a_session_without_the_protocol_is_refused():
    compactor = Compactor(provider=CountingSummarizer())
    with pytest.raises(TypeError, match="Session protocol"):
        CompactingSession(object(), compactor)
    with pytest.raises(TypeError, match="Compactor"):
        CompactingSession(SQLiteSession("x"), object())
    with pytest.raises(TypeError, match="Compactor"):
        compaction_input_filter(object())


def test_benchmark_prints_the_row_with_at_most_five_wiring_lines():
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks/frameworks/openai_agents_session.py"), "--json"],
        capture_output=True, text=True, check=True, encoding="utf-8",
    )
    row = json.loads(done.stdout)
    assert row["user_lines"] <= 5
    assert (row["library"]["refused"], row["library"]["fields_lost"]) == (0, 0)
    assert row["library"]["summary_calls"] <= row["builtin"]["summary_calls"]
    assert row["library"]["summarised_twice"] == 0
    assert row["versions"]["openai-agents"]


def test_offline_example_runs_through_the_runner():
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples/openai_agents_loop.py")],
        capture_output=True, text=True, check=True, encoding="utf-8",
    )
    assert "full compactions:" in done.stdout
    assert "refused: 0" in done.stdout


class SeeingModel(CheckingModel):
    """Also keeps every request it was sent, as JSON."""

    sent = ""

    async def get_response(self, *args: Any, **kwargs: Any) -> Any:
        self.sent += json.dumps(kwargs["input"], default=repr)
        return await super().get_response(*args, **kwargs)


def test_two_sessions_on_one_compactor_stay_apart():
    compactor = Compactor(provider=CountingSummarizer(), threshold=3_000)
    config = RunConfig(call_model_input_filter=compaction_input_filter(compactor))
    models = {name: SeeingModel() for name in ("alice", "bob")}
    sessions = {name: CompactingSession(SQLiteSession(name), compactor) for name in models}

    async def interleaved() -> None:
        for run in range(6):
            for name, model in models.items():
                await Runner.run(make_agent(model), f"{name} task {run}",
                                 session=sessions[name], run_config=config, max_turns=7)

    asyncio.run(interleaved())
    for name, model in models.items():
        other = "bob" if name == "alice" else "alice"
        stored = json.dumps(asyncio.run(sessions[name].session.get_items()))
        assert f"{other} task" not in stored
        assert f"{name} task 5" in model.sent
        assert f"{other} task" not in model.sent
        assert model.checks.calls == 30
        assert (model.checks.refused, model.checks.fields_lost) == (0, 0), model.checks.reasons


def test_filter_keys_conversations_by_the_session_id_it_is_given():
    compactor = Compactor(provider=CountingSummarizer(), threshold=3_000)
    seen: list[str] = []

    def key(data: Any) -> str:
        seen.append(data.agent.name)
        return "fixed"

    model = CheckingModel()
    config = RunConfig(call_model_input_filter=compaction_input_filter(compactor, session_id=key))
    asyncio.run(run_session(make_agent(model), SQLiteSession("keyed"), config))
    assert seen == ["coder"] * 40
    assert (model.checks.refused, model.checks.fields_lost) == (0, 0)
    with pytest.raises(TypeError, match="session_id"):
        compaction_input_filter(compactor, session_id=3)  # type: ignore[arg-type]


class FailingRewrite(SQLiteSession):
    """A store whose first write after every other clear fails (each rewrite's)."""

    clears = 0
    fail_next = False

    async def clear_session(self) -> None:
        self.clears += 1
        self.fail_next = self.clears % 2 == 1
        await super().clear_session()

    async def add_items(self, items: list[Any]) -> None:
        if self.fail_next:
            self.fail_next = False
            raise OSError("disk full")
        await super().add_items(items)


def test_a_failed_rewrite_puts_the_stored_history_back(caplog):
    compactor = Compactor(provider=CountingSummarizer(), threshold=3_000)
    store = FailingRewrite("failing")
    model = CheckingModel()
    asyncio.run(run_session(make_agent(model), CompactingSession(store, compactor), None))
    stored = asyncio.run(store.get_items())
    assert "restoring it" in caplog.text
    assert sum(1 for item in stored if item.get("role") == "user") == 8  # every task kept
    assert (model.checks.refused, model.checks.fields_lost) == (0, 0)


def test_inside_one_run_a_compaction_is_never_thrown_away_at_the_next_call():
    def one_run(make_filter: Any) -> tuple[CheckingModel, CountingSummarizer]:
        summarizer = CountingSummarizer()
        model = CheckingModel(calls_per_run=30)
        config = RunConfig(call_model_input_filter=make_filter(
            Compactor(provider=summarizer, threshold=3_000)))
        asyncio.run(Runner.run(make_agent(model), "Read the modules.",
                               session=SQLiteSession("long"), run_config=config, max_turns=31))
        return model, summarizer

    def jumps(sizes: list[int]) -> int:  # a request far bigger than the one before it
        return sum(1 for before, after in itertools.pairwise(sizes) if after > before + 1_500)

    _, naive = one_run(naive_filter)
    assert summarised_twice(naive)  # the naive filter summarises the same reads again
    model, ours = one_run(compaction_input_filter)
    assert model.checks.calls == 30
    assert 2 <= ours.calls < naive.calls
    assert jumps(model.sizes) == 0
    assert summarised_twice(ours) == set()
    assert (model.checks.refused, model.checks.fields_lost) == (0, 0)


def test_the_fake_model_refuses_what_the_api_refuses_and_counts_lost_fields():
    def lossy(data: Any) -> ModelInputData:  # drops reasoning items and the calls' status
        items = [{k: v for k, v in item.items() if k != "status"}
                 for item in data.model_data.input if item.get("type") != "reasoning"]
        return ModelInputData(input=items, instructions=data.model_data.instructions)

    model = CheckingModel()
    asyncio.run(Runner.run(make_agent(model), "Read.", session=SQLiteSession("lossy"),
                           run_config=RunConfig(call_model_input_filter=lossy), max_turns=7))
    assert model.checks.refused == model.checks.calls - 1  # all but the first request
    assert model.checks.fields_lost > 0
    assert any("without its reasoning" in reason for reason in model.checks.reasons)


def test_run_config_data_given_to_a_compactor_names_the_input_filter() -> None:
    data = CallModelData(
        model_data=ModelInputData(input=[], instructions=None), agent=None, context=None
    )
    with pytest.raises(
        TypeError, match=r"an OpenAI Agents SDK CallModelData.*compaction_input_filter"
    ):
        Compactor(lambda prompt: "summary")(data)  # type: ignore[arg-type]
