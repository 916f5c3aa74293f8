"""court_kit settings and tokens: the COURT_ environment contract and bearer tokens."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from court_kit.settings import DEV_TOKEN_SECRET, ConfigError, Settings
from court_kit.tokens import Identity, TokenError, Verifier, issue_token, service_token

SECRET = "kit-test-secret-0123456789abcdef012345"


def test_defaults_per_service() -> None:
    for service, grpc_port, metrics_port in (("rules", 50051, 9101), ("lobby", 50052, 9102),
                                             ("ranking", 50053, 9103), ("bot", 50054, 9104)):
        s = Settings.load(service, {"COURT_ENV": "dev"})
        assert s.listen == f"127.0.0.1:{grpc_port}" and s.metrics_listen == f"127.0.0.1:{metrics_port}"
        assert s.nats_url == "nats://127.0.0.1:4222" and s.state_dir == Path(".state")
        assert s.database_url == f"sqlite:///.state/{service}.db"
        assert (s.rules_addr, s.lobby_addr, s.ranking_addr, s.bot_addr) == (
            "127.0.0.1:50051", "127.0.0.1:50052", "127.0.0.1:50053", "127.0.0.1:50054")
        assert s.log_format == "json" and s.token_secret == DEV_TOKEN_SECRET


def test_environment_and_overrides() -> None:
    env = {"COURT_ENV": "prod", "COURT_TOKEN_SECRET": SECRET, "COURT_NATS_URL": "nats://a:1,nats://b:2",
           "COURT_LISTEN": "0.0.0.0:6000", "COURT_METRICS_LISTEN": "", "COURT_LOG_FORMAT": "console",
           "COURT_STATE_DIR": "/var/lib/court", "COURT_RULES_ADDR": "rules:50051", "COURT_STREAM_REPLICAS": "3",
           "COURT_OUTBOX_SWEEP_DELAY": "2.5"}
    s = Settings.load("rules", env, listen="127.0.0.1:0")
    assert s.listen == "127.0.0.1:0"  # an override wins
    assert s.nats_servers() == ["nats://a:1", "nats://b:2"] and s.metrics_listen == ""
    assert s.log_format == "console" and s.rules_addr == "rules:50051" and s.stream_replicas == 3
    assert s.database_url == "sqlite:////var/lib/court/rules.db"
    assert s.extra_float("OUTBOX_SWEEP_DELAY", 5.0) == 2.5 and s.extra_int("GAME_CACHE", 7) == 7
    assert SECRET not in repr(s), "the secret never shows in logs of the settings"


@pytest.mark.parametrize(("env", "needle"), [
    ({}, "COURT_TOKEN_SECRET is not set"),
    ({"COURT_ENV": "prod"}, "COURT_TOKEN_SECRET is not set"),
    ({"COURT_ENV": "dev", "COURT_LOG_FORMAT": "xml"}, "COURT_LOG_FORMAT"),
    ({"COURT_ENV": "dev", "COURT_LISTEN": "nowhere"}, "COURT_LISTEN"),
    ({"COURT_ENV": "dev", "COURT_NATS_URL": "http://x"}, "COURT_NATS_URL"),
    ({"COURT_ENV": "dev", "COURT_STREAM_REPLICAS": "many"}, "COURT_STREAM_REPLICAS"),
    ({"COURT_ENV": "dev", "COURT_RANKING_ADDR": "ranking"}, "COURT_RANKING_ADDR"),
])
def test_bad_settings_fail_at_start_up_naming_the_variable(env: dict, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        Settings.load("lobby", env)
    assert needle in str(info.value)


def test_service_starts_with_a_clear_error_without_a_secret(tmp_path: Path) -> None:
    exe = Path(sys.executable).parent / "court-rules"
    r = subprocess.run([str(exe)], env={"PATH": "/usr/bin:/bin", "COURT_ENV": "prod"}, capture_output=True,
                       text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 2 and "COURT_TOKEN_SECRET is not set" in r.stderr


def test_tokens_round_trip_and_fail_clearly() -> None:
    v = Verifier(SECRET)
    tok = issue_token(SECRET, "alice", "player", ttl=60)
    ident = v.verify(tok)
    assert ident == Identity("alice", "player", ident.exp) and not ident.may_read_full
    assert v.verify(tok) is ident, "a verified token is remembered"
    assert v.verify(issue_token(SECRET, "bi", "analytics")).may_read_full
    for bad, needle in [
        ("", "missing bearer token"),
        ("garbage", "malformed"),
        (issue_token("another-secret-0123456789abcdef0123", "alice", "player"), "signature"),
        (issue_token(SECRET, "alice", "player", ttl=10, now=time.time() - 100), "expired"),
    ]:
        with pytest.raises(TokenError) as info:
            v.verify(bad)
        assert needle in str(info.value)
    # a cached token still expires
    short = issue_token(SECRET, "bob", "player", ttl=1)
    v.verify(short)
    with pytest.raises(TokenError, match="expired"):
        v.verify(short, now=time.time() + 3600)
    with pytest.raises(ValueError, match="role"):
        issue_token(SECRET, "x", "emperor")
    with pytest.raises(ValueError):
        issue_token(SECRET, "bot:3", "player")  # a player id can never pose as a bot seat
    svc = Verifier(SECRET).verify(service_token(Settings.load("lobby", {}, token_secret=SECRET)))
    assert (svc.sub, svc.role) == ("service:lobby", "service")


def test_court_token_cli(tmp_path: Path) -> None:
    exe = Path(sys.executable).parent / "court-token"
    r = subprocess.run([str(exe), "--sub", "carol", "--role", "admin", "--ttl", "120"],
                       env={"PATH": "/usr/bin:/bin", "COURT_TOKEN_SECRET": SECRET}, capture_output=True, text=True,
                       timeout=60, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    ident = Verifier(SECRET).verify(r.stdout.strip())
    assert (ident.sub, ident.role) == ("carol", "admin") and ident.exp - time.time() <= 121
    r = subprocess.run([str(exe), "--sub", "carol"], env={"PATH": "/usr/bin:/bin"}, capture_output=True,
                       text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 2 and "COURT_TOKEN_SECRET" in r.stderr
    # `make token` runs the same script with COURT_ENV=dev (dry run: no setup step is executed here)
    r = subprocess.run(["make", "-n", "token", "SUB=dave", "ROLE=bot"], cwd=Path(__file__).resolve().parents[2],
                       capture_output=True, text=True, timeout=60)
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
