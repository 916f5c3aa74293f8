"""court_kit settings and tokens: the COURT_ environment contract and bearer tokens."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from court_kit.keys import Signer, issue_token
from court_kit.settings import ConfigError, Settings
from court_kit.tokens import Identity, TokenError, Verifier, preflight

from tests.fixtures import keys


def test_defaults_per_service(tmp_path: Path) -> None:
    for service, grpc_port, metrics_port in (
        ("rules", 50051, 9101),
        ("lobby", 50052, 9102),
        ("ranking", 50053, 9103),
        ("bot", 50054, 9104),
    ):
        s = Settings.load(service, {"COURT_ENV": "dev", "COURT_STATE_DIR": str(tmp_path)})
        assert s.listen == f"127.0.0.1:{grpc_port}" and s.metrics_listen == f"127.0.0.1:{metrics_port}"
        assert s.nats_url == "nats://127.0.0.1:4222" and s.state_dir == tmp_path
        assert s.database_url == f"sqlite:///{tmp_path}/{service}.db"
        assert (s.rules_addr, s.lobby_addr, s.ranking_addr, s.bot_addr) == (
            "127.0.0.1:50051",
            "127.0.0.1:50052",
            "127.0.0.1:50053",
            "127.0.0.1:50054",
        )
        assert s.log_format == "json"
        # dev: keys generated once under the state folder; only the lobby and bot get a private key
        assert s.token_keys == str(tmp_path / "keys" / "token-keys.json")
        assert bool(s.signing_key) == (service in ("lobby", "bot")) and len(s.id_secret) >= 32
        preflight(s)
    assert (
        Settings.load("rules", {"COURT_ENV": "dev", "COURT_STATE_DIR": str(tmp_path)}).id_secret
        == s.id_secret
    )
    assert (
        Settings.load("rules", {"COURT_ENV": "dev", "COURT_STATE_DIR": str(tmp_path / "other")}).id_secret
        != s.id_secret
    ), "each state folder gets its own random keys and secret"


def test_environment_and_overrides() -> None:
    env = {
        "COURT_ENV": "prod",
        **keys.env("rules"),
        "COURT_NATS_URL": "nats://a:1,nats://b:2",
        "COURT_LISTEN": "0.0.0.0:6000",
        "COURT_METRICS_LISTEN": "",
        "COURT_LOG_FORMAT": "console",
        "COURT_STATE_DIR": "/var/lib/court",
        "COURT_RULES_ADDR": "rules:50051",
        "COURT_STREAM_REPLICAS": "3",
        "COURT_OUTBOX_SWEEP_DELAY": "2.5",
    }
    s = Settings.load("rules", env, listen="127.0.0.1:0")
    assert s.listen == "127.0.0.1:0"  # an override wins
    assert s.nats_servers() == ["nats://a:1", "nats://b:2"] and s.metrics_listen == ""
    assert s.log_format == "console" and s.rules_addr == "rules:50051" and s.stream_replicas == 3
    assert s.database_url == "sqlite:////var/lib/court/rules.db"
    assert s.extra_float("OUTBOX_SWEEP_DELAY", 5.0) == 2.5 and s.extra_int("GAME_CACHE", 7) == 7
    assert keys.ID_SECRET not in repr(s), "the secret never shows in logs of the settings"
    assert s.event_loop == "uvloop", "services run on uvloop unless COURT_EVENT_LOOP says asyncio"
    assert Settings.load("rules", {**env, "COURT_EVENT_LOOP": "asyncio"}).event_loop == "asyncio"


@pytest.mark.parametrize(
    ("name", "loop_type"), [("uvloop", "uvloop.Loop"), ("asyncio", "asyncio.unix_events")]
)
def test_run_loop_runs_on_the_named_event_loop(name: str, loop_type: str) -> None:
    """COURT_EVENT_LOOP's loop is the one run_service (and make bench's ceiling) run on."""
    import asyncio

    from court_kit.server import run_loop

    async def which() -> str:
        loop = asyncio.get_running_loop()
        return f"{type(loop).__module__}.{type(loop).__name__}"

    assert run_loop(which(), name).startswith(loop_type)
    with pytest.raises(ConfigError, match="COURT_EVENT_LOOP must be uvloop or asyncio"):
        run_loop(which(), "tokio")


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({}, "COURT_TOKEN_KEYS is not set"),
        ({"COURT_ENV": "prod"}, "COURT_TOKEN_KEYS is not set"),
        ({"COURT_ENV": "dev", "COURT_LOG_FORMAT": "xml"}, "COURT_LOG_FORMAT"),
        ({"COURT_ENV": "dev", "COURT_LISTEN": "nowhere"}, "COURT_LISTEN"),
        ({"COURT_ENV": "dev", "COURT_NATS_URL": "http://x"}, "COURT_NATS_URL"),
        ({"COURT_ENV": "dev", "COURT_STREAM_REPLICAS": "many"}, "COURT_STREAM_REPLICAS"),
        ({"COURT_ENV": "dev", "COURT_RANKING_ADDR": "ranking"}, "COURT_RANKING_ADDR"),
        (
            {"COURT_ENV": "dev", "COURT_EVENT_LOOP": "tokio"},
            "COURT_EVENT_LOOP must be one of uvloop, asyncio",
        ),
    ],
)
def test_bad_settings_fail_at_start_up_naming_the_variable(env: dict, needle: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        Settings.load("lobby", {**env, "COURT_STATE_DIR": str(tmp_path)})
    assert needle in str(info.value)


def test_service_starts_with_a_clear_error_without_keys(tmp_path: Path) -> None:
    exe = Path(sys.executable).parent / "court-rules"
    r = subprocess.run(
        [str(exe)],
        env={"PATH": "/usr/bin:/bin", "COURT_ENV": "prod"},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert r.returncode == 2 and "COURT_TOKEN_KEYS is not set" in r.stderr


def test_tokens_round_trip_and_fail_clearly() -> None:
    v = Verifier(keys.KEY_SET, "court-rules")
    tok = issue_token(keys.LOBBY, "alice", "player", ttl=60)
    ident = v.verify(tok)
    assert ident == Identity("alice", "player", ident.exp, "court-lobby") and not ident.may_read_full
    assert v.verify(tok) is ident, "a verified token is remembered"
    assert v.verify(issue_token(keys.LOBBY, "bi", "analytics")).may_read_full
    for bad, needle in [
        ("", "missing bearer token"),
        ("garbage", "malformed"),
        (issue_token(Signer.generate("court-lobby"), "alice", "player"), "key id is unknown"),
        (issue_token(Signer.generate("court-lobby", keys.LOBBY.kid), "alice", "player"), "signature"),
        (issue_token(keys.LOBBY, "alice", "player", ttl=10, now=time.time() - 100), "expired"),
    ]:
        with pytest.raises(TokenError) as info:
            v.verify(bad)
        assert needle in str(info.value)
    # a cached token still expires
    short = issue_token(keys.LOBBY, "bob", "player", ttl=1)
    v.verify(short)
    with pytest.raises(TokenError, match="expired"):
        v.verify(short, now=time.time() + 3600)
    with pytest.raises(ValueError, match="role"):
        issue_token(keys.LOBBY, "x", "emperor")
    with pytest.raises(ValueError):
        issue_token(keys.LOBBY, "bot:3", "player")  # a player id can never pose as a bot seat
    for role in ("player", "admin", "analytics", "service"):
        with pytest.raises(ValueError, match="may not mint"):
            issue_token(keys.BOT, "x", role)  # the bot service's key mints bot tokens only
    with pytest.raises(ValueError, match="may not mint"):
        issue_token(keys.LOBBY, "bot-service", "bot")
    with pytest.raises(ValueError, match="mints no tokens"):
        Signer.generate("court-ranking")


def test_court_token_cli(tmp_path: Path) -> None:
    exe = Path(sys.executable).parent / "court-token"

    def token(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(exe), *args],
            env={"PATH": "/usr/bin:/bin", **env},
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
        )

    r = token(keys.env("lobby"), "--sub", "carol", "--role", "admin", "--ttl", "120")
    assert r.returncode == 0, r.stderr
    ident = Verifier(keys.KEY_SET, "court-ranking").verify(r.stdout.strip())
    assert (ident.sub, ident.role) == ("carol", "admin") and ident.exp - time.time() <= 121
    r = token(keys.env("rules"), "--sub", "carol")
    assert r.returncode == 2 and "COURT_SIGNING_KEY" in r.stderr
    # dev: signs with the lobby key a stack generated under the state folder, which dev services trust;
    # with no such key it says so and generates none (no stack would trust it: issue 32)
    r = token({"COURT_ENV": "dev"}, "--sub", "dave")
    assert r.returncode == 2 and "no development key under .state/keys/" in r.stderr, r.stderr
    assert not (tmp_path / ".state").exists()
    dev = Settings.load("rules", {"COURT_ENV": "dev", "COURT_STATE_DIR": str(tmp_path / ".state")})
    r = token({"COURT_ENV": "dev"}, "--sub", "dave")
    assert r.returncode == 0, r.stderr
    assert Verifier(dev.token_keys, "court-rules").verify(r.stdout.strip()).sub == "dave"
    # `make token` runs the same script with COURT_ENV=dev (dry run: no setup step is executed here)
    r = subprocess.run(
        ["make", "-n", "token", "SUB=dave", "ROLE=bot"],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert 'court-token --sub "dave" --role "bot"' in r.stdout and "COURT_ENV" in r.stdout


def test_json_logs_carry_service_level_and_bound_ids(tmp_path: Path) -> None:
    code = (
        "import sys; from court_kit import logging as kl\n"
        "kl.configure_logging('rules', 'json', 'info', stream=sys.stdout)\n"
        "kl.bind(request_id='r-1', game_id='g-1'); kl.get_logger('t').info('move accepted', seq=3)\n"
        "kl.get_logger('t').debug('hidden at info level')\n"
        "import logging; logging.getLogger('grpc').warning('from the standard library')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert len(lines) == 2
    first = lines[0]
    assert first["event"] == "move accepted" and first["level"] == "info" and first["service"] == "rules"
    assert first["request_id"] == "r-1" and first["game_id"] == "g-1" and first["seq"] == 3
    assert first["timestamp"].endswith("Z")
    assert lines[1]["level"] == "warning" and lines[1]["service"] == "rules"
