"""`make run`'s launcher (``court stack up``): the whole stack comes up, a bot game is drawn as it is
played, Ctrl-C stops every process, and a second start finds the game and the balances again."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
from pathlib import Path

import nats
import pytest
from court_cli.stack import SERVICES, free_port

from tests.cli.conftest import COURT, STACK_TIMEOUT, Output

pytestmark = [pytest.mark.slow, pytest.mark.integration]

PASSWORD = "correct horse battery"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead too; only its parent's wait() would clear it
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(")")[-1].split()[0] != "Z"


def stack_env(tmp_path: Path) -> dict[str, str]:
    """Fixed free ports for both starts (as `make run` keeps its default ports), metrics off."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COURT_")}
    for name in SERVICES:
        env[f"COURT_{name.upper()}_ADDR"] = f"127.0.0.1:{free_port()}"
        env[f"COURT_METRICS_LISTEN_{name.upper()}"] = ""
    env["COURT_NATS_URL"] = f"nats://127.0.0.1:{free_port()}"
    env["COURT_STATE_DIR"] = str(tmp_path / "state")
    env["COURT_CONFIG_DIR"] = str(tmp_path / "config")
    return env


def court(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [COURT, *args], env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    assert "Traceback" not in done.stdout + done.stderr
    return done.stdout


def launch(env: dict[str, str], cwd: Path, pace: float) -> tuple[subprocess.Popen[str], Output]:
    proc = subprocess.Popen(
        [COURT, "stack", "up", "--pace", str(pace)],
        env=env,
        cwd=cwd,
        text=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    return proc, Output(proc)


def stop(proc: subprocess.Popen[str], out: Output, pids: list[int]) -> None:
    """Ctrl-C: the launcher stops everything, exits 0, and leaves no process behind."""
    proc.send_signal(signal.SIGINT)
    assert proc.wait(120) == 0, out.text[-3000:]
    out.wait_for(
        r"^Stopped: rules \(0\), ranking \(0\), lobby \(0\), bot \(0\), analytics \(0\), web \(0\), nats \(0\)$",
        10,
    )
    left = [p for p in pids if alive(p)]
    assert not left, f"still running after Ctrl-C: {left}"


def anonymous_nats_refused(url: str) -> bool:
    async def attempt() -> bool:
        try:
            nc = await nats.connect(url, allow_reconnect=False, connect_timeout=5)
        except Exception as exc:  # noqa: BLE001 - the refusal's type varies by nats-py version
            return "authorization" in str(exc).lower()
        await nc.close()
        return False

    return asyncio.run(attempt())


def running_pids(state: Path) -> list[int]:
    info = json.loads((state / "stack.json").read_text())
    return [info["launcher_pid"], info["nats_pid"], *(s["pid"] for s in info["services"].values())]


@pytest.mark.timeout(900)
def test_make_run_plays_a_bot_game_stops_on_ctrl_c_and_finds_it_again(tmp_path: Path) -> None:
    env = stack_env(tmp_path)
    state = tmp_path / "state"
    procs: list[subprocess.Popen[str]] = []
    try:
        # first start: every service healthy, where each listens, how to play, then the demo game
        first, out = launch(env, tmp_path, pace=0.5)
        procs.append(first)
        out.wait_for(r"^Court is running", STACK_TIMEOUT)
        for name in SERVICES:
            out.wait_for(rf"^  {name} is SERVING on {re.escape(env[f'COURT_{name.upper()}_ADDR'])}$", 5)
            shown = env[f"COURT_{name.upper()}_ADDR"]
            shown = f"http://{shown}/" if name == "web" else shown  # the browser's URL
            out.wait_for(rf"^  {name}\s+{re.escape(shown)}$", 5)
        out.wait_for(rf"^Play in your browser: open http://{re.escape(env['COURT_WEB_ADDR'])}/$", 5)
        out.wait_for(r"make play", 5)
        pids = running_pids(state)
        assert len(pids) == 2 + len(SERVICES) and all(alive(p) for p in pids)

        game = out.wait_for(r"^New demo game (g[0-9a-f]+): Queen's Court for four", 120)[0].group(1)
        out.wait_for(
            rf"^\[{game[:9]}\] watching Queen's Court at move 0: Demo Autopilot, Blue Otter \(bot, heuristic\)",
            30,
        )
        moves = out.wait_for(
            rf"^\[{game[:9]} move (\d+)\] (Demo Autopilot|Blue Otter|Yellow Bird|Red Fox) played "
            r"(\w\w|the glove) on ",
            120,
            count=8,
        )
        players = {m.group(2) for m in moves}
        assert len(players) >= 3, players  # the bots and the autopilot all play
        assert [int(m.group(1)) for m in moves] == sorted(int(m.group(1)) for m in moves)

        # meanwhile a person stakes an ante in an online game: 1000 - 100 rank points
        court(env, "register", "Bob", "--password", PASSWORD)
        made = court(
            env,
            "lobby",
            "create",
            "queens_court",
            "--online",
            "--ante",
            "100",
            "--bots",
            "--start",
            "--no-play",
        )
        bobs_game = re.search(r"Game (g[0-9a-f]+) started", made).group(1)
        assert "Bob: 900 rank points" in court(env, "rank")
        # NATS runs with per-service users: `court events` reads as analytics, anonymous is refused
        assert bobs_game in court(
            env, "events", "tail", "--game-id", bobs_game, "--from-start", "--count", "1", "--json"
        )
        assert anonymous_nats_refused(env["COURT_NATS_URL"])

        shown = max(int(m.group(1)) for m in out.wait_for(rf"^\[{game[:9]} move (\d+)\]", 1))
        stop(first, out, pids)
        assert not (state / "stack.json").exists()
        assert not re.search(rf"\[{game[:9]}\] Game over", out.text), "the demo game ended before Ctrl-C"

        # second start on the same state folder: the unfinished demo game goes on, the balance is kept
        second, out2 = launch(env, tmp_path, pace=0.02)
        procs.append(second)
        out2.wait_for(r"^Court is running", STACK_TIMEOUT)
        pids2 = running_pids(state)
        saved = out2.wait_for(
            rf"^Resuming the demo game {game} \(Queen's Court, saved at move (\d+)\)\.$", 120
        )
        assert int(saved[0].group(1)) >= shown
        later = out2.wait_for(rf"^\[{game[:9]} move (\d+)\] .* played ", 120, count=3)
        assert all(int(m.group(1)) > int(saved[0].group(1)) for m in later)
        assert "Bob: 900 rank points" in court(env, "rank")
        assert bobs_game in court(env, "games")
        stop(second, out2, pids2)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(30)


@pytest.mark.timeout(600)
def test_ctrl_c_with_the_output_pipe_gone_still_stops_the_services_before_nats(tmp_path: Path) -> None:
    """``make run | tee run.log``, then Ctrl-C: the terminal's SIGINT ends tee too, so the launcher's
    "Stopping…" goes to a pipe nobody reads. The launcher used to die there (rich's broken-pipe
    exit) before it stopped anything; every child then got its death signal at once, nats-server
    went first, and the services lost NATS in the middle of their own shutdown (court-bot hung
    until its 9 s watchdog). Now it stops the stack in order (services, then NATS) and exits 0."""
    env = stack_env(tmp_path)
    state = tmp_path / "state"
    read_end, write_end = os.pipe()
    errors = tmp_path / "launcher.err"
    with open(errors, "wb") as err:
        proc = subprocess.Popen(
            [COURT, "stack", "up", "--no-demo"],
            env=env,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            stdout=write_end,
            stderr=err,
        )
    os.close(write_end)
    try:
        seen = b""
        with os.fdopen(read_end, "rb", buffering=0) as reader:
            while b"Ctrl-C stops everything" not in seen:
                chunk = reader.read(4096)
                assert chunk, seen.decode(errors="replace")[-3000:]
                seen += chunk
            pids = running_pids(state)
        # the reader is gone (tee, ended by the same Ctrl-C); now the launcher's SIGINT
        proc.send_signal(signal.SIGINT)
        assert proc.wait(120) == 0, errors.read_text()[-3000:]
        assert "Traceback" not in errors.read_text(), errors.read_text()[-3000:]
        left = [p for p in pids if alive(p)]
        assert not left, f"still running after Ctrl-C: {left}"
        for name in SERVICES:
            log = (state / "logs" / f"{name}.log").read_text()
            shutdown = log[log.rindex('"event": "shutting down"') :]
            assert '"event": "stopped"' in shutdown, (name, shutdown[-2000:])
            # NATS was still there while the service shut down: no connection cut under it
            assert "unexpected EOF" not in shutdown, (name, shutdown[-2000:])
            assert "took longer than" not in shutdown, (name, shutdown[-2000:])
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


def _processes_in(folder: Path) -> list[int]:
    """The processes whose working folder is ``folder`` (the launcher runs every child there)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if Path(os.readlink(proc / "cwd")) == folder:
                    found.append(int(proc.name))
            except OSError:
                continue
    return [p for p in found if alive(p)]


@pytest.mark.timeout(600)
def test_ctrl_c_while_starting_stops_everything_even_when_started_with_sigint_ignored(tmp_path: Path) -> None:
    """A non-interactive shell starts background jobs with SIGINT ignored (CI ran the tests so), and
    the launcher inherits that. It used to take SIGINT only once its event loop's handler was in
    place: a Ctrl-C (or ``kill -INT``) before that, while the stack was starting or as the banner
    said "Ctrl-C stops everything", was lost, and the launcher ran on (CI, this stop: 120 s with
    no answer). Now SIGINT during the start stops what started and exits 130."""
    env = stack_env(tmp_path)
    state = tmp_path / "state"
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)  # inherited by the launcher, as in CI
    try:
        proc, out = launch(env, tmp_path, pace=0.05)
    finally:
        signal.signal(signal.SIGINT, before)
    try:
        out.wait_for(r"^Starting Court: ", STACK_TIMEOUT)  # printed as the start begins (it takes seconds)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(120) == 130, out.text[-3000:]
        out.wait_for(r"^interrupted; everything stopped$", 10)
        assert "Traceback" not in out.text, out.text[-3000:]
        assert _processes_in(state) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
