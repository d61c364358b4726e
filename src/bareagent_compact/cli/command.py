"""A summary provider that runs a shell command: the model behind ``compact`` and ``replay``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Callable
from typing import Final

from bareagent_compact.protocols import Message

COMMAND_TIMEOUT: Final = 600.0


class CommandProvider:
    """A summary provider that runs a shell command: the prompt on stdin, the summary on stdout.

    The prompt is the system message, a blank line and the transcript (``text``),
    or the two messages as JSON (``json``). A non-zero exit, a timeout or empty
    output is a failed summary; each failure's text is passed to ``on_error``, so
    that the verb running the command can say why no summary came.
    """

    def __init__(
        self,
        command: str,
        timeout: float,
        prompt_format: str = "text",
        on_error: Callable[[str], object] | None = None,
    ) -> None:
        self.command = command
        self.timeout = timeout
        self.prompt_format = prompt_format
        self.on_error = on_error

    def __call__(self, prompt: list[Message], /) -> str:
        text = self._prompt_text(prompt)
        # Its own process group, so that a timeout ends the command and everything
        # it started (a model CLI under `sh -c` keeps running, and billing, otherwise).
        process = subprocess.Popen(
            self.command,
            shell=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="replace",
            start_new_session=True,
        )
        try:
            stdout, stderr = process.communicate(text, timeout=self.timeout)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            raise RuntimeError(
                self._failed(f"the summary command timed out after {self.timeout:g}s")
            ) from None
        if process.returncode != 0:
            tail = stderr.strip().splitlines()[-3:]
            raise RuntimeError(
                self._failed(
                    f"the summary command exited with status {process.returncode}"
                    + (": " + " / ".join(tail) if tail else "")
                )
            )
        if not stdout.strip():
            self._failed("the summary command printed nothing")
        return stdout.strip()

    def _prompt_text(self, prompt: list[Message]) -> str:
        if self.prompt_format == "json":
            return json.dumps(prompt, ensure_ascii=False)
        return "\n\n".join(str(m.get("content", "")) for m in prompt)

    def _failed(self, error: str) -> str:
        """Report ``error`` to ``on_error`` and return it."""
        if self.on_error is not None:
            self.on_error(error)
        return error


def _kill_group(process: subprocess.Popen[str]) -> None:
    """End a timed-out command and every process it started, then reap it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, AttributeError):
        process.kill()
    process.communicate()
