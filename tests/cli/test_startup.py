"""What `court whoami` and `court lobby list` import (issue 32: each command took seconds to start on a
busy machine): not pydantic, not the rules client with the games' typed views, not the engines, the
databases' or the lake's libraries, nor NATS. How long they take is measured, not asserted
(`make bench ONLY=cli`, tests/bench/cli.py); a value that does need converting still is, through typer's
own converter (court_cli.startup)."""

from __future__ import annotations

import subprocess
import sys

from tests.cli.test_catalog import FACTS, ROOT, imported

NOT_AT_START = (
    "pydantic",
    "court_client.rules",
    "court_contract.typed",
    "court_contract.actions",
    "court_games",
    "court_bots",
    "sqlalchemy",
    "duckdb",
    "pyarrow",
    "nats",
    "jwt",
    "cryptography",
    "court_cli.play",
    "court_cli.render",
    "court_cli.stack",
)


def loaded(mods: set[str]) -> list[str]:
    return sorted(m for m in mods - FACTS if any(m == h or m.startswith(h + ".") for h in NOT_AT_START))


def test_court_whoami_and_lobby_list_import_nothing_they_do_not_use() -> None:
    mods, out = imported("whoami")
    assert "services (" in out and "not signed in" in out, out
    assert (
        "grpc" in mods and "court_client.services" in mods
    )  # the lobby's client: whoami asks it who you are
    assert not loaded(mods), loaded(mods)[:20]
    mods, out = imported("lobby", "list", "--game", "hearts")
    assert "you are not signed in" in out, out
    assert not loaded(mods), loaded(mods)[:20]


def test_a_value_that_needs_converting_is_still_converted_and_checked() -> None:
    bad = subprocess.run(
        [sys.executable, "-m", "court_cli", "ledger", "--limit", "many"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert bad.returncode == 2, bad.stdout + bad.stderr
    assert "Invalid value for '--limit'" in bad.stderr and "valid integer" in bad.stderr, bad.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "court_cli", "events", "tail", "--count", "2.5"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert bad.returncode == 2 and "Invalid value for '--count'" in bad.stderr, bad.stderr
