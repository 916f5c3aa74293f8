"""Services as child processes, so a test can really SIGKILL a replica (and start it again)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from court_cli.stack import free_port  # noqa: F401 - re-exported for the lobby tests

ROOT = Path(__file__).resolve().parents[2]


class ServiceProcess:
    """``argv`` as a child, its output in a log file (never a pipe that could fill and block it);
    ``wait_ready`` reads the log until a line shows it listens."""

    _n = 0

    def __init__(self, argv: list[str], env: dict[str, str], log_dir: Path | None = None):
        self.argv, self.env = argv, env
        ServiceProcess._n += 1
        folder = Path(log_dir or env.get("COURT_STATE_DIR") or "/tmp")
        folder.mkdir(parents=True, exist_ok=True)
        self.log_path = folder / f"proc-{os.getpid()}-{ServiceProcess._n}.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            argv, env={**os.environ, **env}, cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT
        )

    @property
    def out(self) -> bytes:
        return self.log_path.read_bytes()

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

    def wait_ready(self, timeout: float = 180.0) -> int:
        deadline = time.monotonic() + timeout
        while (port := self._ready()) is None:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError(
                    f"{self.argv} did not start: {self.out.decode(errors='replace')[-3000:]}"
                )
            time.sleep(0.05)  # a child process's log file: nothing to wait on but the file
        return port

    def wait_exit(self, timeout: float = 60.0) -> int:
        """The exit status (negative: the signal)."""
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def close(self) -> None:
        self.kill()
        self._log.close()


def service_script(service: str) -> str:
    script = Path(sys.executable).parent / f"court-{service}"
    assert script.exists(), f"court-{service} is not installed: run `make setup`"
    return str(script)
