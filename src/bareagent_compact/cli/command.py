"""A summary provider that runs a shell command: the model behind ``compact`` and ``replay``.

The command is bounded: its standard output is capped (:data:`MAX_OUTPUT_BYTES`
by default), and it is killed with its whole process group at the timeout,
whatever it does with its output. Once the command itself has exited, its
output is read for at most :data:`_DRAIN_SECONDS` more: a process it left
running with the pipe open (``setsid sleep 60 &``) is not waited for.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from typing import IO, Final

from bareagent_compact.protocols import Message

COMMAND_TIMEOUT: Final = 600.0
MAX_OUTPUT_BYTES: Final = 1024 * 1024
"""The default cap on a summary command's standard output: 1 MiB."""
_STDERR_BYTES: Final = 64 * 1024
"""What is kept of a command's standard error (its last lines name the failure)."""
_DRAIN_SECONDS: Final = 0.5
"""How long output is still read once the command has exited."""
_CHUNK: Final = 65536


class OutputTooLarge(RuntimeError):
    """The summary command printed more than the cap."""


class _Run:
    """One run of the command: its pipes read against a deadline, its group killed at the end."""

    def __init__(self, process: subprocess.Popen[bytes], timeout: float, cap: int) -> None:
        self.process = process
        self.deadline = time.monotonic() + timeout
        self.cap = cap
        self.stdout = bytearray()
        self.stderr = bytearray()
        self.timed_out = False
        self.oversized = False

    def collect(self) -> None:
        """Read both pipes until end of file, the cap, the deadline, or the drain after exit;
        then wait for the command's exit, up to the deadline."""
        selector = selectors.DefaultSelector()
        for pipe in (self.process.stdout, self.process.stderr):
            if pipe is not None:
                selector.register(pipe, selectors.EVENT_READ)
        try:
            self._pump(selector)
        finally:
            selector.close()
        if self.timed_out or self.oversized:
            return
        try:
            self.process.wait(max(0.0, self.deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.timed_out = True

    def _pump(self, selector: selectors.BaseSelector) -> None:
        drain_until: float | None = None
        while selector.get_map() and not self.oversized:
            now = time.monotonic()
            if drain_until is None and self.process.poll() is not None:
                drain_until = now + _DRAIN_SECONDS
            stop = self.deadline if drain_until is None else min(drain_until, self.deadline)
            if now >= stop:
                self.timed_out = drain_until is None
                return
            for key, _ in selector.select(min(stop - now, 0.05)):
                self._read(selector, key.fileobj)  # type: ignore[arg-type]

    def _read(self, selector: selectors.BaseSelector, pipe: IO[bytes]) -> None:
        data = os.read(pipe.fileno(), _CHUNK)
        if not data:
            selector.unregister(pipe)
            return
        if pipe is self.process.stdout:
            self.stdout += data
            self.oversized = len(self.stdout) > self.cap
        else:
            self.stderr += data
            del self.stderr[:-_STDERR_BYTES]

    def finish(self) -> int | None:
        """Kill what is left of the group, close the pipes; the exit status (``None``: killed)."""
        status = self.process.poll()
        _kill_group(self.process)
        for pipe in (self.process.stdin, self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()
        self.process.wait()
        return None if self.timed_out or self.oversized else status


class CommandProvider:
    """A summary provider that runs a shell command: the prompt on stdin, the summary on stdout.

    The prompt is the system message, a blank line and the transcript (``text``),
    or the two messages as JSON (``json``). A non-zero exit, a timeout, output
    over ``max_output_bytes`` or empty output is a failed summary; each failure's
    text is passed to ``on_error``, so that the verb running the command can say
    why no summary came. ``oversized`` tells whether the last failure was the cap.
    """

    def __init__(
        self,
        command: str,
        timeout: float,
        prompt_format: str = "text",
        on_error: Callable[[str], object] | None = None,
        max_output_bytes: int = MAX_OUTPUT_BYTES,
    ) -> None:
        self.command = command
        self.timeout = timeout
        self.prompt_format = prompt_format
        self.on_error = on_error
        self.max_output_bytes = max_output_bytes
        self.oversized = False

    def __call__(self, prompt: list[Message], /) -> str:
        data = self._prompt_text(prompt).encode("utf-8", "surrogatepass")
        # Its own process group, so that a timeout ends the command and everything
        # it started (a model CLI under `sh -c` keeps running, and billing, otherwise).
        process = subprocess.Popen(
            self.command,
            shell=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        run = _Run(process, self.timeout, self.max_output_bytes)
        writer = threading.Thread(target=_feed, args=(process.stdin, data), daemon=True)
        writer.start()
        try:
            run.collect()
        finally:
            status = run.finish()
            writer.join(1.0)
        return self._summary(run, status)

    def _summary(self, run: _Run, status: int | None) -> str:
        """The summary the run printed, or a failure naming why there is none."""
        self.oversized = run.oversized
        if run.oversized:
            raise OutputTooLarge(
                self._failed(
                    f"the summary command printed more than {self.max_output_bytes:,} bytes "
                    "(--max-output-bytes)"
                )
            )
        if run.timed_out:
            raise RuntimeError(
                self._failed(f"the summary command timed out after {self.timeout:g}s")
            )
        if status != 0:
            tail = run.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
            raise RuntimeError(
                self._failed(
                    f"the summary command exited with status {status}"
                    + (": " + " / ".join(tail) if tail else "")
                )
            )
        text = run.stdout.decode("utf-8", "replace").strip()
        if not text:
            self._failed("the summary command printed nothing")
        return text

    def _prompt_text(self, prompt: list[Message]) -> str:
        if self.prompt_format == "json":
            return json.dumps(prompt, ensure_ascii=False)
        return "\n\n".join(str(m.get("content", "")) for m in prompt)

    def _failed(self, error: str) -> str:
        """Report ``error`` to ``on_error`` and return it."""
        if self.on_error is not None:
            self.on_error(error)
        return error


def _feed(pipe: IO[bytes] | None, data: bytes) -> None:
    """Write the prompt to the command's stdin (in a thread: it may never read it)."""
    if pipe is None:
        return
    try:
        pipe.write(data)
        pipe.close()
    except (BrokenPipeError, OSError, ValueError):
        pass


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """End every process of the command's group that is still running."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, AttributeError):
        if process.poll() is None:
            process.kill()
