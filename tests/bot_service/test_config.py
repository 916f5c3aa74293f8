"""The bot service's settings: COURT_ environment in, typed config out, clear failures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from court_bot.config import BotConfig
from court_bots.levels import DEFAULT_BUDGET_MS
from court_kit.settings import ConfigError, Settings

from tests.fixtures import keys

BASE = keys.env("bot")


def config(**env: str) -> tuple[Settings, BotConfig]:
    settings = Settings.load("bot", {**BASE, **env})
    return settings, BotConfig.from_settings(settings)


def test_defaults() -> None:
    settings, cfg = config()
    assert settings.listen == "127.0.0.1:50054"
    assert settings.rules_addr == "127.0.0.1:50051"
    assert settings.metrics_listen == "127.0.0.1:9104"
    assert cfg.budgets_ms == DEFAULT_BUDGET_MS
    assert cfg.consume and cfg.decision_threads == 1


def test_budgets_and_tuning_from_the_environment() -> None:
    _, cfg = config(
        COURT_BOT_BUDGET_RANDOM_MS="2",
        COURT_BOT_BUDGET_HEURISTIC_MS="12.5",
        COURT_BOT_BUDGET_EXPERT_MS="120",
        COURT_BOT_CONCURRENCY="3",
        COURT_BOT_ACK_WAIT="4",
        COURT_BOT_DECISION_THREADS="0",
    )
    assert cfg.budgets_ms == {"random": 2.0, "heuristic": 12.5, "expert": 120.0}
    assert (cfg.concurrency, cfg.ack_wait, cfg.decision_threads) == (3, 4.0, 0)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("COURT_BOT_BUDGET_EXPERT_MS", "0"),
        ("COURT_BOT_BUDGET_EXPERT_MS", "fast"),
        ("COURT_BOT_CONCURRENCY", "0"),
        ("COURT_BOT_ACK_WAIT", "0.1"),
    ],
)
def test_bad_values_fail_naming_the_variable(name: str, value: str) -> None:
    with pytest.raises(ConfigError) as info:
        config(**{name: value})
    assert name in str(info.value)


def test_court_bot_refuses_to_start_without_a_secret(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "court-bot"
    proc = subprocess.run(
        [str(script)],
        env={"PATH": "/usr/bin:/bin", "COURT_BOT_BUDGET_EXPERT_MS": "45"},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert "COURT_TOKEN_KEYS" in proc.stderr
    proc = subprocess.run(
        [str(script)],
        env={"PATH": "/usr/bin:/bin", "COURT_ENV": "dev", "COURT_BOT_BUDGET_EXPERT_MS": "-3"},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert "COURT_BOT_BUDGET_EXPERT_MS" in proc.stderr
