"""A small agent REPL on the Anthropic Messages API with /compact, /new and /resume.

Type a request and the agent works on it with its tools. Commands:

    /compact [focus]   summarise the conversation now (focus: what the summary should keep)
    /new               save this session and start an empty one
    /resume [id]       go back to a saved session (the latest other one by default)
    /sessions          list the saved sessions
    /quit              leave (end of input does too)

Sessions are saved with ``JsonlTranscriptManager``: a snapshot before every
summary, and the whole session on ``/new`` and ``/quit``.

    python examples/repl.py --offline            # fake local API, no key
    ANTHROPIC_API_KEY=... python examples/repl.py --dir ~/.my-agent/transcripts
"""

from __future__ import annotations

import argparse
import inspect
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, TextIO

sys.path.insert(0, str(Path(__file__).resolve().parent))

import anthropic
from _common import ANTHROPIC_TOOLS, SYSTEM_PROMPT, run_tool
from _fake_server import FakeServer, anthropic_client

from bareagent_compact import Compactor, JsonlTranscriptManager, is_context_overflow
from bareagent_compact.providers import anthropic_provider

MAX_TOKENS = 1024
MAX_STEPS = 8  # model requests per user request at most


def new_session_id() -> str:
    now = time.time_ns()
    stamp = time.strftime("session-%Y%m%d-%H%M%S-", time.localtime(now // 1_000_000_000))
    return stamp + f"{now // 1000 % 1_000_000:06d}"  # the microseconds of that second


class Repl:
    """The REPL's state: one history, one compactor, one transcript directory."""

    def __init__(
        self, client: Any, model: str, directory: Path, threshold: int, out: TextIO
    ) -> None:
        self.client = client
        self.model = model
        self.out = out
        self.transcripts = JsonlTranscriptManager(directory)
        self.compactor = Compactor(
            provider=anthropic_provider(client, model, max_tokens=MAX_TOKENS),
            transcript_mgr=self.transcripts,
            threshold=threshold,
            session_id=new_session_id(),
            archive=self.transcripts.archive,
        )
        self.messages: list[Any] = []

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    # ------------------------------------------------------------------ commands

    def compact(self, focus: str) -> None:
        options: dict[str, Any] = {"force": True}
        if focus:
            if "instructions" in inspect.signature(self.compactor.__call__).parameters:
                options["instructions"] = focus
            else:
                self.say("(this version of the compactor takes no focus text; summarising all)")
        result = self.compactor(self.messages, **options)
        self.say(
            f"Context compaction {result.action.value}: "
            f"{result.tokens_before} -> {result.tokens_after} tokens"
            + (f" ({result.reason})" if result.reason else "")
        )

    def save(self) -> None:
        if self.messages:
            self.compactor(self.messages)  # SDK objects become plain dicts before saving
            self.transcripts.save(self.messages, self.compactor.get_session_id())

    def new(self) -> None:
        self.save()
        self.compactor.set_session_id(new_session_id())
        self.messages = []
        self.say(f"New session {self.compactor.get_session_id()}")

    def resume(self, session_id: str) -> None:
        current = self.compactor.get_session_id()
        if not session_id:
            others = [s for s in self.transcripts.list_sessions() if s != current]
            if not others:
                self.say("No other saved session")
                return
            session_id = others[0]  # the most recently saved first
        self.save()
        try:
            self.messages = self.transcripts.resume(session_id)
        except (FileNotFoundError, KeyError, ValueError) as error:
            self.say(f"Cannot resume {session_id}: {error}")
            return
        self.compactor.set_session_id(session_id)
        self.say(f"Resumed {session_id}: {len(self.messages)} messages")

    # ------------------------------------------------------------------ the agent

    def ask(self) -> Any:
        return self.client.messages.create(
            model=self.model,
            max_tokens=MAX_TOKENS,
            system=SYSTEM_PROMPT,
            tools=ANTHROPIC_TOOLS,
            messages=self.messages,
        )

    def work(self, request: str) -> None:
        self.messages.append({"role": "user", "content": request})
        for _ in range(MAX_STEPS):
            self.compactor(self.messages)
            try:
                response = self.ask()
            except Exception as error:
                if not is_context_overflow(error):
                    raise
                self.compactor(self.messages, force=True)
                response = self.ask()
            self.messages.append({"role": "assistant", "content": response.content})
            for block in response.content:
                if block.type == "text":
                    self.say(f"agent: {block.text}")
                elif block.type == "tool_use":
                    self.say(f"  [tool] {block.name}({block.input})")
            if response.stop_reason != "tool_use":
                return
            self.messages.append(
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": block.id,
                            "content": run_tool(block.name, block.input),
                        }
                        for block in response.content
                        if block.type == "tool_use"
                    ],
                }
            )
        self.say("(stopped after the step limit)")

    def handle(self, line: str) -> bool:
        """Run one input line; False when the REPL should end."""
        command, _, rest = line.strip().partition(" ")
        rest = rest.strip()
        if not command:
            return True
        if command == "/quit":
            return False
        if command == "/compact":
            self.compact(rest)
        elif command == "/new":
            self.new()
        elif command == "/resume":
            self.resume(rest)
        elif command == "/sessions":
            self.say(", ".join(self.transcripts.list_sessions()) or "(none saved)")
        elif command.startswith("/"):
            self.say(f"Unknown command {command}")
        else:
            self.work(line.strip())
        return True


def main() -> int:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--offline", action="store_true", help="talk to a local fake API, no key")
    cli.add_argument("--model", default="claude-sonnet-5-5")
    cli.add_argument("--dir", type=Path, default=None, help="transcript directory")
    cli.add_argument("--threshold", type=int, default=None)
    args = cli.parse_args()
    server = None
    if args.offline:
        server = FakeServer()
        client = anthropic_client(server)
    else:
        client = anthropic.Anthropic()
    directory = args.dir or Path(tempfile.mkdtemp(prefix="repl-transcripts-"))
    threshold = args.threshold or (3000 if args.offline else 50000)
    repl = Repl(client, args.model, directory, threshold, sys.stdout)
    repl.say(f"Session {repl.compactor.get_session_id()} (transcripts in {directory})")
    interactive = sys.stdin.isatty()
    while True:
        if interactive:
            print("> ", end="", flush=True)
        line = sys.stdin.readline()
        if not line or not repl.handle(line):
            break
    repl.save()
    if server is not None:
        repl.say(f"rejected_requests={server.stats.rejected}")
        return 1 if server.stats.rejected else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
