"""Services as child processes, so a test can really SIGKILL a replica (and start it again)."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServiceProcess:
    """``argv`` as a child; ``wait_ready`` reads its output until a line shows it listens."""

    def __init__(self, argv: list[str], env: dict[str, str]):
        self.argv, self.env = argv, env
        self.proc = subprocess.Popen(argv, env={**os.environ, **env}, cwd=ROOT, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)
        self.out = b""

    def _ready(self) -> int | None:
        for line in self.out.splitlines():
            if line.startswith(b"PORT "):
                return int(line.split()[1])
            if b"service listening" in line:
                try:
                    return int(json.loads(line)["port"])
                except (ValueError, KeyError):
                    continue
        return None

    def wait_ready(self, timeout: float = 60.0) -> int:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while (port := self._ready()) is None:
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                raise AssertionError(f"{self.argv} did not start: {self.out.decode(errors='replace')[-3000:]}")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                self.out += os.read(fd, 65536)
        return port

    def wait_exit(self, timeout: float = 60.0) -> int:
        """The exit status (negative: the signal); reads the rest of its output."""
        rc = self.proc.wait(timeout)
        assert self.proc.stdout is not None
        self.out += self.proc.stdout.read()
        return rc

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def close(self) -> None:
        self.kill()
        if self.proc.stdout:
            self.proc.stdout.close()


def service_script(service: str) -> str:
    script = Path(sys.executable).parent / f"court-{service}"
    assert script.exists(), f"court-{service} is not installed: run `make setup`"
    return str(script)
