"""The edge's pure parts: whose X-Forwarded-For is believed, the address signature, the method
list against the protos; and its start-up refusal without an edge secret."""

from __future__ import annotations

import ipaddress
import os
import re
import subprocess
import sys
from pathlib import Path

from court_kit.edge import ADDR_HEADER, MAX_SKEW, SIG_HEADER, sign_client, verified_client
from court_web.http import client_address
from court_web.routes import PUBLIC, UPSTREAMS, hidden_methods

ROOT = Path(__file__).resolve().parents[2]


def test_the_client_address_behind_trusted_proxies_only() -> None:
    nets = (ipaddress.ip_network("10.0.0.0/8"),)

    def scope(peer: str, *xff: str) -> dict[str, object]:
        return {"client": (peer, 5000), "headers": [(b"x-forwarded-for", x.encode()) for x in xff]}

    # no trusted proxy: the header is the client's own claim, ignored
    assert client_address(scope("198.51.100.1", "203.0.113.9"), ()) == "198.51.100.1"
    # an untrusted peer sending the header: ignored
    assert client_address(scope("198.51.100.1", "203.0.113.9"), nets) == "198.51.100.1"
    # through the ingress: the hop the ingress saw, not what the client prepended
    assert client_address(scope("10.1.2.3", "6.6.6.6, 203.0.113.9"), nets) == "203.0.113.9"
    assert client_address(scope("10.1.2.3", "203.0.113.9, 10.9.9.9"), nets) == "203.0.113.9"
    assert client_address(scope("10.1.2.3", "6.6.6.6", "203.0.113.9"), nets) == "203.0.113.9"
    # garbage after the last trusted hop: the proxy itself is the client
    assert client_address(scope("10.1.2.3", "203.0.113.9, not-an-ip"), nets) == "10.1.2.3"
    assert client_address(scope("10.1.2.3"), nets) == "10.1.2.3"


def test_the_address_signature_holds_only_for_its_address_secret_and_time() -> None:
    secret = "s" * 40
    md = sign_client(secret, "203.0.113.9", now=1_000_000)
    assert verified_client(md, secret, now=1_000_000 + MAX_SKEW) == "203.0.113.9"
    assert verified_client(md, secret, now=1_000_000 + MAX_SKEW + 1) is None  # stale: a replay
    assert verified_client(md, secret, now=1_000_000 - MAX_SKEW - 1) is None  # from the future
    assert verified_client(md, "t" * 40, now=1_000_000) is None  # another secret
    assert verified_client(md, "", now=1_000_000) is None  # a service without a secret trusts nothing
    (_, addr), (_, sig) = md
    assert verified_client(((ADDR_HEADER, "203.0.113.10"), (SIG_HEADER, sig)), secret, now=1_000_000) is None
    assert verified_client(((ADDR_HEADER, addr),), secret, now=1_000_000) is None
    assert verified_client(((ADDR_HEADER, addr), (SIG_HEADER, "x." + sig)), secret, now=1_000_000) is None


def test_the_public_list_covers_every_method_and_docs_web_names_each() -> None:
    every = {f"/{up.full_name}/{m.name}" for up in UPSTREAMS for m in up.descriptor.methods}
    assert set(PUBLIC) | set(hidden_methods()) == every and not set(PUBLIC) & set(hidden_methods())
    assert "/court.rules.v1.RulesService/WatchGame" in PUBLIC
    for admin in ("/court.rules.v1.RulesService/GetHistory", "/court.ranking.v1.RankingService/Audit"):
        assert admin in hidden_methods()
    doc = (ROOT / "docs" / "web.md").read_text()
    table = doc[doc.index("## The public methods") : doc.index("## The client's address")]
    for path in every:
        service, method = path.strip("/").split("/")
        row = next(line for line in table.splitlines() if f"`{service}`" in line)
        assert re.search(rf"\b{method}\b", row), f"docs/web.md does not name {service}/{method}"


def test_court_web_refuses_to_start_without_an_edge_secret_outside_dev(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COURT_")}
    done = subprocess.run(
        [str(Path(sys.executable).parent / "court-web")],
        env={**env, "COURT_ENV": "prod", "COURT_STATE_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done
    assert "COURT_EDGE_SECRET is not set" in done.stderr
    short = subprocess.run(
        [str(Path(sys.executable).parent / "court-web")],
        env={**env, "COURT_ENV": "prod", "COURT_STATE_DIR": str(tmp_path), "COURT_EDGE_SECRET": "short"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert short.returncode == 2 and "COURT_EDGE_SECRET is too short" in short.stderr, short
