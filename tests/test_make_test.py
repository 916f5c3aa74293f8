"""`make test` starts a private PostgreSQL server for the suite and stops it when the tests end: when
they pass, when they fail, and when the run is interrupted (Ctrl-C). Each case runs the real make
target on a one-test selection (PYTEST_ARGS), its cluster in a folder of its own
(COURT_TEST_PG_DIR), and then looks for any process of that cluster."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.integration]

ROOT = Path(__file__).resolve().parent.parent

# The one test `make test` runs: the suite's PostgreSQL answers while it runs; then it passes, fails, or
# says (through a FIFO) that it is running and waits to be interrupted.
INNER = """
import os, threading
import psycopg

def test_inner():
    with psycopg.connect(os.environ["COURT_TEST_POSTGRES_URL"].replace("postgresql+psycopg", "postgresql")) as c:
        assert c.execute("select 1").fetchone() == (1,)
    mode = os.environ["INNER_MODE"]
    if mode == "fail":
        raise AssertionError("failing on purpose")
    if mode == "wait":
        with open(os.environ["INNER_FIFO"], "w") as f:
            f.write("running\\n")
        threading.Event().wait()
"""


def cluster_processes(pg_dir: Path) -> list[str]:
    """Command lines of running processes that belong to the cluster under ``pg_dir``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (proc / "stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            continue
        if str(pg_dir) in cmd and state != "Z":
            found.append(f"{proc.name}: {cmd}")
    return found


@pytest.fixture
def run_dir() -> Iterator[Path]:
    # under /tmp and open to others: the server runs as the 'postgres' user when we are root
    d = Path(tempfile.mkdtemp(prefix="court-make-test-", dir="/tmp"))
    d.chmod(0o755)
    (d / "test_inner.py").write_text(INNER)
    try:
        yield d
    finally:
        subprocess.run(
            [str(ROOT / "scripts" / "test-postgres.sh"), "stop"],
            env=_env(d, "pass"),
            capture_output=True,
            timeout=120,
        )
        shutil.rmtree(d, ignore_errors=True)


def _env(d: Path, mode: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COURT_", "PYTEST_", "MAKE"))}
    env.update({"COURT_TEST_PG_DIR": str(d / "pg"), "INNER_MODE": mode, "INNER_FIFO": str(d / "fifo")})
    return env


def make_test(d: Path, mode: str) -> subprocess.Popen[str]:
    args = f"-p no:cacheprovider -n 0 -q {d / 'test_inner.py'}"
    return subprocess.Popen(
        # SIGINT at its default, as in a person's terminal: a run started in the background of a shell
        # without job control (nohup ... &) ignores it, and an ignored signal is inherited, so
        # neither make, nor the recipe's trap, nor pytest would ever see the Ctrl-C (stop 22's CI
        # runs of this session: the inner pytest sat in the test for 360 s with SIGINT ignored)
        ["env", "--default-signal=INT", "make", "--no-print-directory", "test", f"PYTEST_ARGS={args}"],
        cwd=ROOT,
        env=_env(d, mode),
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _session_ps(sid: int) -> str:
    """The processes of session ``sid`` (make's): pid, state, what each waits in, command line."""
    ps = subprocess.run(["ps", "-eo", "pid,sid,stat,wchan:24,args"], capture_output=True, text=True)
    lines = ps.stdout.splitlines()
    return "\n".join(lines[:1] + [ln for ln in lines[1:] if ln.split()[1] == str(sid)])


def assert_stopped(d: Path, output: str) -> None:
    left = cluster_processes(d)
    assert not left, f"still running after make test: {left}"
    assert not (d / "pg" / "data").exists(), "the throw-away cluster's data folder is left behind"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode, status", [("pass", 0), ("fail", 2)])
def test_make_test_stops_its_postgres_when_tests_pass_or_fail(run_dir: Path, mode: str, status: int) -> None:
    proc = make_test(run_dir, mode)
    out, _ = proc.communicate(timeout=240)
    assert proc.returncode == status, out[-3000:]
    assert ("1 passed" if mode == "pass" else "1 failed") in out, out[-3000:]
    assert_stopped(run_dir, out)


@pytest.mark.timeout(600)
def test_make_test_stops_its_postgres_when_interrupted(run_dir: Path) -> None:
    fifo = run_dir / "fifo"
    os.mkfifo(fifo)
    proc = make_test(run_dir, "wait")
    said: list[str] = []
    reader = threading.Thread(target=lambda: said.append(fifo.read_text()), daemon=True)
    reader.start()
    reader.join(timeout=180)  # the FIFO opens when the inner test is running (PostgreSQL up)
    if not said:
        proc.kill()
        pytest.fail("the inner test never started: " + (proc.communicate(timeout=30)[0] or "")[-3000:])
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in a terminal reaches the whole foreground group
    # generous: pytest's summary and the cluster's shutdown took over 120 s on a machine at load 20
    try:
        out, _ = proc.communicate(timeout=360)
    except subprocess.TimeoutExpired:
        running = _session_ps(proc.pid)
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail(f"one Ctrl-C did not end make test in 360 s; running then:\n{running}")
    assert proc.returncode != 0, out[-3000:]
    assert "KeyboardInterrupt" in out or "Interrupted" in out, out[-3000:]
    assert_stopped(run_dir, out)
