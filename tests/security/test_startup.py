"""Outside dev a service refuses to start, exit status 2 and a clear message on stderr, when a key or
secret is missing, a default or development one, too short, or held by a service that must not hold it.
The console scripts' own ``main`` runs in process (``court_kit.server.run_service``); one real
``court-lobby`` process shows the same from the outside."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from court_bot.app import main as bot_main
from court_kit.keys import Signer, ensure_dev_keys
from court_lobby.app import main as lobby_main
from court_ranking.app import main as ranking_main
from court_rules.app import main as rules_main

from tests.fixtures import keys

MAINS = {"rules": rules_main, "lobby": lobby_main, "ranking": ranking_main, "bot": bot_main}


def run(service: str, env: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: Any) -> tuple[int, str]:
    for name in list(__import__("os").environ):
        if name.startswith("COURT_"):
            monkeypatch.delenv(name)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    code = MAINS[service]([])
    return code, capsys.readouterr().err


def cases(tmp: Path) -> list[tuple[str, str, dict[str, str], str]]:
    dev = ensure_dev_keys(tmp / "devstate")
    foreign = Signer.generate("court-lobby", "other-lobby")
    other_set = keys.write_key_set(tmp / "other-set.json", foreign)
    rsa_like = tmp / "rsa.json"
    rsa_like.write_text(
        '{"keys": [{"kty": "RSA", "kid": "r1", "iss": "court-lobby", "n": "xx", "e": "AQAB"}]}'
    )
    hs = tmp / "hs.json"
    hs.write_text('{"keys": [{"kty": "oct", "kid": "h1", "iss": "court-lobby", "k": "c2VjcmV0"}]}')
    ranking_key = tmp / "ranking-set.json"
    ranking_key.write_text(
        '{"keys": [{"kty": "OKP", "crv": "Ed25519", "kid": "rk", "iss": "court-ranking", '
        '"x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}'
    )
    private_in_set = tmp / "private-set.json"
    private_in_set.write_text('{"keys": [' + __import__("json").dumps(keys.LOBBY.jwk()) + "]}")
    base = {"COURT_ENV": "prod", "COURT_STATE_DIR": str(tmp / "state"), "COURT_METRICS_LISTEN": ""}
    good = {s: {**base, **keys.env(s)} for s in MAINS}
    return [
        ("rules", "no key set", {**base, "COURT_ID_SECRET": keys.ID_SECRET}, "COURT_TOKEN_KEYS is not set"),
        (
            "rules",
            "unreadable key set",
            {**good["rules"], "COURT_TOKEN_KEYS": str(tmp / "nope.json")},
            "cannot read",
        ),
        (
            "rules",
            "dev key set in prod",
            {**good["rules"], "COURT_TOKEN_KEYS": str(dev.key_set)},
            "development keys",
        ),
        ("ranking", "RSA key", {**good["ranking"], "COURT_TOKEN_KEYS": str(rsa_like)}, "only Ed25519"),
        ("ranking", "HMAC key", {**good["ranking"], "COURT_TOKEN_KEYS": str(hs)}, "only Ed25519"),
        (
            "ranking",
            "ranking issuer",
            {**good["ranking"], "COURT_TOKEN_KEYS": str(ranking_key)},
            "mints no tokens",
        ),
        (
            "ranking",
            "private key in the set",
            {**good["ranking"], "COURT_TOKEN_KEYS": str(private_in_set)},
            "public keys only",
        ),
        (
            "ranking",
            "ranking holding a key",
            {**good["ranking"], "COURT_SIGNING_KEY": str(keys.SIGNING["lobby"])},
            "mints no tokens",
        ),
        (
            "rules",
            "missing id secret",
            {k: v for k, v in good["rules"].items() if k != "COURT_ID_SECRET"},
            "COURT_ID_SECRET is not set",
        ),
        ("rules", "short id secret", {**good["rules"], "COURT_ID_SECRET": "abc123"}, "too short"),
        (
            "bot",
            "default id secret",
            {**good["bot"], "COURT_ID_SECRET": "dev-only-token-secret-not-for-production"},
            "placeholder",
        ),
        (
            "lobby",
            "no signing key",
            {k: v for k, v in good["lobby"].items() if k != "COURT_SIGNING_KEY"},
            "COURT_SIGNING_KEY is not set",
        ),
        (
            "lobby",
            "dev signing key",
            {
                **good["lobby"],
                "COURT_SIGNING_KEY": str(dev.signing_key("lobby")),
                "COURT_TOKEN_KEYS": str(dev.key_set),
            },
            "development",
        ),
        (
            "lobby",
            "the bot's key",
            {**good["lobby"], "COURT_SIGNING_KEY": str(keys.SIGNING["bot"])},
            "belongs to court-bot",
        ),
        (
            "lobby",
            "key not published",
            {**good["lobby"], "COURT_TOKEN_KEYS": str(other_set)},
            "not in COURT_TOKEN_KEYS",
        ),
        (
            "bot",
            "no signing key",
            {k: v for k, v in good["bot"].items() if k != "COURT_SIGNING_KEY"},
            "COURT_SIGNING_KEY is not set",
        ),
    ]


def test_prod_refuses_missing_default_short_or_misplaced_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    wrong = {}
    for service, why, env, needle in cases(tmp_path):
        code, err = run(service, env, monkeypatch, capsys)
        if code != 2 or needle not in err or "configuration error" not in err:
            wrong[f"{service}: {why}"] = (code, err[-300:])
    assert not wrong, wrong


def test_a_real_process_exits_2_with_the_reason(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "COURT_ENV": "prod", **keys.env("lobby"), "COURT_ID_SECRET": "x"}
    env.pop("COURT_SIGNING_KEY")
    r = subprocess.run(
        [str(Path(sys.executable).parent / "court-lobby")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert r.returncode == 2 and "COURT_SIGNING_KEY is not set" in r.stderr, r.stderr
