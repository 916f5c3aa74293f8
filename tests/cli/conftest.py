"""End-to-end fixtures for the terminal client: the real local stack (court_cli.stack, the launcher
``make run`` uses: a real nats-server and the four services as processes, on free ports and a
temporary state folder) and a real terminal (tmux, the Debian package .ci/run installs).

Nothing here installs anything: without tmux the terminal tests fail and say so.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import termios
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from court_cli.stack import LocalStack, StackConfig

BIN = Path(sys.executable).parent
COURT = str(BIN / "court")
STACK_TIMEOUT = 180.0  # seconds for the stack to come up on a busy CI machine


def client_env(stack: LocalStack, config_dir: Path) -> dict[str, str]:
    """The environment of a person's shell pointed at ``stack``, with their own config folder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COURT_")}
    env.update(stack.config.client_env())
    env.update(
        {
            "COURT_CONFIG_DIR": str(config_dir),
            "COURT_STATE_DIR": str(stack.state_dir),
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "TERM": "xterm-256color",
        }
    )
    return env


@contextlib.contextmanager
def running_stack(state_dir: Path) -> Iterator[LocalStack]:
    """The whole stack on free ports and ``state_dir``, started and stopped by the launcher, without the demo."""
    stack = LocalStack(StackConfig.from_env({}, free_ports=True, state_dir=state_dir))
    stack.start(timeout=STACK_TIMEOUT)
    try:
        yield stack
    finally:
        stack.stop()


@pytest.fixture
def local_stack(tmp_path: Path) -> Iterator[LocalStack]:
    """The whole stack, started and stopped by the launcher, without the demo."""
    with running_stack(tmp_path / "state") as stack:
        yield stack


class Terminal:
    """A real terminal: a tmux session on a private tmux server, driven by send-keys, read by capture-pane."""

    def __init__(self, tmp: Path, env: dict[str, str], width: int = 160, height: int = 60):
        tmux = shutil.which("tmux")
        if tmux is None:
            pytest.fail(
                "tmux is not installed: the terminal tests drive a real terminal with it "
                "(.ci/run installs the Debian package; here: apt-get install -y tmux)"
            )
        self.tmux = tmux
        self.socket = f"court-test-{uuid.uuid4().hex[:10]}"
        self.env = env
        shell_env = " ".join(f"{k}={_quote(v)}" for k, v in sorted(env.items()))
        rc = tmp / "bashrc"
        rc.write_text("PS1='$ '\n")
        self._run(
            "new-session",
            "-d",
            "-s",
            "court",
            "-x",
            str(width),
            "-y",
            str(height),
            f"env -i {shell_env} bash --noprofile --rcfile {rc} -i",
        )
        self._run("set-option", "-t", "court", "history-limit", "50000")

    def _run(self, *args: str) -> str:
        out = subprocess.run(
            [self.tmux, "-u", "-L", self.socket, *args],
            capture_output=True,
            text=True,
            timeout=30,
            env={**os.environ, "LANG": "C.UTF-8"},
        )
        if out.returncode:
            raise RuntimeError(f"tmux {' '.join(args[:2])} failed: {out.stderr}")
        return out.stdout

    def type(self, text: str, enter: bool = True) -> None:
        self._run("send-keys", "-t", "court", "-l", text)
        if enter:
            self._run("send-keys", "-t", "court", "Enter")

    def wait_echo_off(self, timeout: float = 30.0) -> None:
        """Until the program in the terminal has turned echo off (a password prompt is reading):
        keys sent earlier would be shown, then flushed by the prompt."""
        tty = self._run("display-message", "-p", "-t", "court", "#{pane_tty}").strip()
        fd = os.open(tty, os.O_RDWR | os.O_NOCTTY)
        try:
            deadline = time.monotonic() + timeout
            while termios.tcgetattr(fd)[3] & termios.ECHO:
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"the terminal's echo stayed on for {timeout:.0f}s:\n{self.screen()[-2000:]}"
                    )
                time.sleep(0.02)  # no event tells when a program changes its terminal's modes
        finally:
            os.close(fd)

    def key(self, key: str) -> None:
        self._run("send-keys", "-t", "court", key)

    def screen(self) -> str:
        """Everything the terminal showed, scrollback included, wrapped lines joined, trailing blanks cut."""
        text = self._run("capture-pane", "-p", "-J", "-t", "court", "-S", "-50000")
        return "\n".join(line.rstrip() for line in text.splitlines()).rstrip("\n")

    def clear(self) -> None:
        self.type("clear")
        self._run("clear-history", "-t", "court")

    def wait_for(self, pattern: str, timeout: float = 60.0, *, after: int = 0) -> re.Match[str]:
        """The first match of ``pattern`` (multi-line: ``^``/``$`` match at each line; tmux drops
        trailing blanks) in the screen text from offset ``after`` on. The terminal
        has no event to wait on, so the screen is read again every 50 ms until the deadline."""
        rx = re.compile(pattern, re.MULTILINE)
        deadline = time.monotonic() + timeout
        while True:
            text = self.screen()
            m = rx.search(text, after)
            if m:
                return m
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{pattern!r} did not appear within {timeout:.0f}s; the screen:\n{text[-6000:]}"
                )
            time.sleep(0.05)

    def close(self) -> None:
        subprocess.run([self.tmux, "-L", self.socket, "kill-server"], capture_output=True, timeout=30)


def _quote(v: str) -> str:
    return "'" + v.replace("'", "'\\''") + "'"


@pytest.fixture
def terminal_for(tmp_path: Path) -> Iterator:
    made: list[Terminal] = []

    def make(env: dict[str, str]) -> Terminal:
        t = Terminal(tmp_path, env)
        made.append(t)
        return t

    yield make
    for t in made:
        t.close()


class Output:
    """A process's stdout collected line by line in a thread, to wait on without blocking it."""

    def __init__(self, proc: subprocess.Popen[str]):
        self.proc = proc
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self.lines.append("<EOF>")
            self._cond.notify_all()

    @property
    def text(self) -> str:
        with self._cond:
            return "\n".join(self.lines)

    def wait_for(self, pattern: str, timeout: float, *, count: int = 1) -> list[re.Match[str]]:
        """Until ``pattern`` has matched ``count`` lines (woken by every new line)."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = [m for line in self.lines if (m := rx.search(line))]
                if len(found) >= count:
                    return found
                left = deadline - time.monotonic()
                if left <= 0 or (self.lines and self.lines[-1] == "<EOF>"):
                    tail = "\n".join(self.lines[-60:])
                    raise AssertionError(
                        f"{pattern!r} x{count} not seen in {timeout:.0f}s; output ends:\n{tail}"
                    )
                self._cond.wait(left)
