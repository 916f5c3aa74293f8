"""Typed settings, parsed once from the ``COURT_`` environment.

The contract with operators and tests (every service starts and is configured
the same way)::

    COURT_ENV              dev | prod (anything but "dev" demands a real secret)
    COURT_NATS_URL         default nats://127.0.0.1:4222 (comma-separated for a cluster)
    COURT_LISTEN           gRPC listen address; rules 127.0.0.1:50051, lobby :50052,
                           ranking :50053, bot :50054 (":PORT" listens on every interface);
                           court-web listens on COURT_WEB_ADDR (this when that is unset)
    COURT_DATABASE_URL     lobby and ranking; default sqlite:///<state dir>/<service>.db
    COURT_TOKEN_KEYS       path of the token key set: the Ed25519 public keys every service
                           verifies bearer tokens with (JWKS-like JSON, court_kit.tokens)
    COURT_SIGNING_KEY      path of this service's own private key (lobby and bot only: the
                           others mint nothing)
    COURT_ID_SECRET        the secret game ids and bot decisions are derived with (rules, bot;
                           32+ characters), never a token key
    COURT_NATS_USER, COURT_NATS_PASSWORD
                           this service's NATS identity (court_kit.natsauth); empty: anonymous
    COURT_NATS_CA          CA bundle (PEM) that signs the NATS servers' certificates: TLS to NATS
    COURT_TLS_CERT, COURT_TLS_KEY
                           PEM certificate chain and key: the gRPC server speaks TLS only
    COURT_TLS_CA           PEM bundle that signs the other services' certificates: calls to them
                           (COURT_RULES_ADDR, ...) use TLS
    COURT_HEALTH_LISTEN    a second, plaintext port serving only grpc.health.v1 (for kubelet probes,
                           which cannot speak TLS); empty: health only on COURT_LISTEN
    COURT_REFLECTION       on | off: gRPC server reflection (default on in dev, off otherwise)
    COURT_MAX_MESSAGE_BYTES  largest gRPC message in or out (default 8 MiB)
    COURT_MAX_STREAMS      concurrent calls (HTTP/2 streams) per client connection (default 100)
    COURT_TOKEN_KEYS_RELOAD  seconds between checks of the key set file for a rotation (default 10)
                           With COURT_ENV=dev and none of the three set, development keys and an
                           id secret are generated once under <state>/keys/.
    COURT_RULES_ADDR, COURT_LOBBY_ADDR, COURT_RANKING_ADDR, COURT_BOT_ADDR
                           where the other services answer (defaults: their loopback ports)
    COURT_WEB_ADDR         where court-web (the Connect edge for browsers) listens, HTTP (default
                           127.0.0.1:8080); court-web's own listen address (docs/web.md)
    COURT_EDGE_SECRET      the secret court-web signs each caller's own address with, and the lobby
                           checks that signature with (32+ characters; docs/web.md); generated under
                           <state>/keys/ with COURT_ENV=dev, required by court-web otherwise
    COURT_STATE_DIR        default ./.state
    COURT_METRICS_LISTEN   Prometheus endpoint; rules 127.0.0.1:9101, lobby :9102,
                           ranking :9103, bot :9104, web :9107; empty disables it
    COURT_LOG_FORMAT       json | console (default json)
    COURT_LOG_LEVEL        debug | info | warning | error (default info)
    COURT_STREAM_REPLICAS  JetStream replicas of the streams a service creates (default 1)
    COURT_EVENT_LOOP       uvloop | asyncio: the event loop a service runs on (default uvloop, the
                           cheaper one per call; asyncio is the standard library's)
    COURT_SHUTDOWN_GRACE   seconds in-flight calls get on SIGTERM (default 6; the process is gone
                           within this + 3 s, see court_kit.server)
    COURT_GC_THRESHOLD     new containers between young cycle collections once a service has
                           started, with start-up's objects frozen out of them (default 5000;
                           0: Python's 700, nothing frozen; court_kit.server.tune_gc)
    COURT_READY_INTERVAL, COURT_READY_TIMEOUT, COURT_READY_FAILURES
                           readiness checks of the required dependencies (court_kit.health)
    COURT_PROJECTOR        rules: on (default) runs the projector (court_rules.projector) inside
                           the rules process; off when court-projector processes run it, as
                           docker-compose.yml and deploy/ do (the projector Deployment)
    COURT_MIGRATE_ON_START lobby and ranking: true (default) migrates the schema at start; false
                           only checks it is current and refuses to start otherwise (production
                           runs `court-lobby migrate` / `court-ranking migrate` as a Job instead)

A missing or malformed value fails at start-up with ``ConfigError`` naming the
variable; tests pass overrides directly (``Settings.load("rules", listen=...)``).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .checks import ConfigError as ConfigError  # its home for callers: a setting failed its check

SERVICES = ("rules", "lobby", "ranking", "bot", "analytics", "projector", "web")
GRPC_PORTS = {
    "rules": 50051,
    "lobby": 50052,
    "ranking": 50053,
    "bot": 50054,
    "analytics": 50055,
    "projector": 50056,
}
WEB_PORT = 8080  # court-web speaks HTTP (Connect, gRPC-Web, the web client's files), not gRPC
METRICS_PORTS = {
    "rules": 9101,
    "lobby": 9102,
    "ranking": 9103,
    "bot": 9104,
    "analytics": 9105,
    "projector": 9106,
    "web": 9107,
}
LOG_FORMATS = ("json", "console")
LOG_LEVELS = ("debug", "info", "warning", "error")
EVENT_LOOPS = ("uvloop", "asyncio")


def _check_address(name: str, value: str, *, allow_empty: bool = False) -> str:
    if value == "" and allow_empty:
        return value
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"{name} must be HOST:PORT (or :PORT), got {value!r}")
    return value


def _int(name: str, raw: str, lo: int, hi: int) -> int:
    try:
        v = int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be an integer from {lo} to {hi}, got {raw!r}") from None
    if not lo <= v <= hi:
        raise ConfigError(f"{name} must be an integer from {lo} to {hi}, got {raw!r}")
    return v


def _float(name: str, raw: str, lo: float) -> float:
    try:
        v = float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number of seconds, got {raw!r}") from None
    if v < lo:
        raise ConfigError(f"{name} must be at least {lo}, got {raw!r}")
    return v


def _bool(name: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name} must be true or false, got {raw[:20]!r}")


def listen_host_port(address: str) -> str:
    """A listen address for grpc/http: ``:PORT`` means every interface."""
    host, _, port = address.rpartition(":")
    return f"[::]:{port}" if host in ("", "*") else address


@dataclass(frozen=True)
class Settings:
    service: str
    env: str = "prod"
    nats_url: str = "nats://127.0.0.1:4222"
    listen: str = ""
    database_url: str = ""
    token_keys: str = ""
    signing_key: str = ""
    id_secret: str = field(default="", repr=False)
    nats_user: str = ""
    nats_password: str = field(default="", repr=False)
    nats_ca: str = ""
    tls_cert: str = ""
    tls_key: str = ""
    tls_ca: str = ""
    reflection: bool = False
    health_listen: str = ""
    max_message_bytes: int = 8 * 1024 * 1024
    max_streams: int = 100
    rules_addr: str = f"127.0.0.1:{GRPC_PORTS['rules']}"
    lobby_addr: str = f"127.0.0.1:{GRPC_PORTS['lobby']}"
    ranking_addr: str = f"127.0.0.1:{GRPC_PORTS['ranking']}"
    bot_addr: str = f"127.0.0.1:{GRPC_PORTS['bot']}"
    web_addr: str = f"127.0.0.1:{WEB_PORT}"
    edge_secret: str = field(default="", repr=False)
    state_dir: Path = Path(".state")
    metrics_listen: str = ""
    log_format: str = "json"
    log_level: str = "info"
    stream_replicas: int = 1
    shutdown_grace: float = 6.0
    event_loop: str = "uvloop"
    migrate_on_start: bool = True
    projector: bool = True
    # COURT_* variables this object does not name, for a service's own settings
    extra: Mapping[str, str] = field(default_factory=dict)

    @property
    def is_dev(self) -> bool:
        return self.env == "dev"

    @classmethod
    def load(cls, service: str, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Parse ``environ`` (default ``os.environ``); ``overrides`` win over the environment."""
        if service not in SERVICES:
            raise ConfigError(f"unknown service {service!r}; known: {', '.join(SERVICES)}")
        env = dict(os.environ if environ is None else environ)

        def get(name: str, default: str) -> str:
            return env.get(f"COURT_{name}", default)

        mode = get("ENV", "prod").strip().lower() or "prod"
        state_dir = Path(get("STATE_DIR", ".state"))
        values: dict[str, Any] = {
            "service": service,
            "env": mode,
            "nats_url": get("NATS_URL", "nats://127.0.0.1:4222"),
            "listen": (
                get("WEB_ADDR", get("LISTEN", f"127.0.0.1:{WEB_PORT}"))
                if service == "web"
                else get("LISTEN", f"127.0.0.1:{GRPC_PORTS[service]}")
            ),
            "database_url": get("DATABASE_URL", ""),
            "token_keys": get("TOKEN_KEYS", ""),
            "signing_key": get("SIGNING_KEY", ""),
            "id_secret": get("ID_SECRET", ""),
            "nats_user": get("NATS_USER", ""),
            "nats_password": get("NATS_PASSWORD", ""),
            "nats_ca": get("NATS_CA", ""),
            "tls_cert": get("TLS_CERT", ""),
            "tls_key": get("TLS_KEY", ""),
            "tls_ca": get("TLS_CA", ""),
            "health_listen": get("HEALTH_LISTEN", ""),
            "reflection": _bool("COURT_REFLECTION", get("REFLECTION", "on" if mode == "dev" else "off")),
            "max_message_bytes": _int(
                "COURT_MAX_MESSAGE_BYTES",
                get("MAX_MESSAGE_BYTES", str(8 * 1024 * 1024)),
                1024,
                64 * 1024 * 1024,
            ),
            "max_streams": _int("COURT_MAX_STREAMS", get("MAX_STREAMS", "100"), 1, 10_000),
            "rules_addr": get("RULES_ADDR", cls.rules_addr),
            "lobby_addr": get("LOBBY_ADDR", cls.lobby_addr),
            "ranking_addr": get("RANKING_ADDR", cls.ranking_addr),
            "bot_addr": get("BOT_ADDR", cls.bot_addr),
            "web_addr": get("WEB_ADDR", cls.web_addr),
            "edge_secret": get("EDGE_SECRET", ""),
            "state_dir": state_dir,
            "metrics_listen": get("METRICS_LISTEN", f"127.0.0.1:{METRICS_PORTS[service]}"),
            "log_format": get("LOG_FORMAT", "json").strip().lower(),
            "log_level": get("LOG_LEVEL", "info").strip().lower(),
            "stream_replicas": _int("COURT_STREAM_REPLICAS", get("STREAM_REPLICAS", "1"), 1, 5),
            "shutdown_grace": _float("COURT_SHUTDOWN_GRACE", get("SHUTDOWN_GRACE", "6"), 0.0),
            "event_loop": get("EVENT_LOOP", "uvloop").strip().lower(),
            "migrate_on_start": _bool("COURT_MIGRATE_ON_START", get("MIGRATE_ON_START", "true")),
            "projector": _bool("COURT_PROJECTOR", get("PROJECTOR", "on")),
        }
        known = {f"COURT_{f.name.upper()}" for f in dataclasses.fields(cls)} | {"COURT_ENV"}
        values["extra"] = {k: v for k, v in env.items() if k.startswith("COURT_") and k not in known}
        values.update(overrides)
        values["state_dir"] = Path(values["state_dir"])
        dev_keys = values["env"] == "dev" and not (
            values["token_keys"] or values["signing_key"] or values["id_secret"]
        )
        if dev_keys or (values["env"] == "dev" and not values["edge_secret"]):
            # here, not at the top: the keys bring jwt and cryptography (0.1-0.5 s), which a reader of
            # GRPC_PORTS (the terminal client, tests/cli/test_startup.py) does not need
            from .keys import ensure_dev_keys, signing_services

            dev = ensure_dev_keys(values["state_dir"])  # once: it locks, loads and may write the keys
            if dev_keys:
                values["token_keys"] = str(dev.key_set)
                if service in signing_services():
                    values["signing_key"] = str(dev.signing_key(service))
                values["id_secret"] = dev.id_secret()
            if not values["edge_secret"]:
                values["edge_secret"] = dev.edge_secret()
        if not values["database_url"]:
            values["database_url"] = f"sqlite:///{values['state_dir'] / (service + '.db')}"
        return cls(**values)

    def __post_init__(self) -> None:
        if not self.token_keys and self.service != "web":  # the edge verifies and mints no token
            raise ConfigError(
                "COURT_TOKEN_KEYS is not set: every service needs the token key set, the path of a JSON file "
                "of Ed25519 public keys (court-keys keyset makes one; set COURT_ENV=dev to generate "
                "development keys under the state folder)"
            )
        if not self.listen:
            port = WEB_PORT if self.service == "web" else GRPC_PORTS.get(self.service, 0)
            object.__setattr__(self, "listen", f"127.0.0.1:{port}")
        if self.log_format not in LOG_FORMATS:
            raise ConfigError(
                f"COURT_LOG_FORMAT must be one of {', '.join(LOG_FORMATS)}, got {self.log_format!r}"
            )
        if self.log_level not in LOG_LEVELS:
            raise ConfigError(
                f"COURT_LOG_LEVEL must be one of {', '.join(LOG_LEVELS)}, got {self.log_level!r}"
            )
        if self.event_loop not in EVENT_LOOPS:
            raise ConfigError(
                f"COURT_EVENT_LOOP must be one of {', '.join(EVENT_LOOPS)}, got {self.event_loop[:20]!r}"
            )
        _check_address("COURT_LISTEN", self.listen)
        _check_address("COURT_METRICS_LISTEN", self.metrics_listen, allow_empty=True)
        _check_address("COURT_HEALTH_LISTEN", self.health_listen, allow_empty=True)
        for name in ("rules_addr", "lobby_addr", "ranking_addr", "bot_addr", "web_addr"):
            _check_address(f"COURT_{name.upper()}", getattr(self, name))
        if bool(self.tls_cert) != bool(self.tls_key):
            raise ConfigError("COURT_TLS_CERT and COURT_TLS_KEY go together: set both (TLS) or neither")
        if not self.nats_url.startswith(("nats://", "tls://", "ws://", "wss://")):
            raise ConfigError(f"COURT_NATS_URL must be a nats:// URL, got {self.nats_url!r}")

    def extra_float(self, name: str, default: float, lo: float = 0.0) -> float:
        """A service's own numeric setting ``COURT_<NAME>`` (seconds and the like)."""
        raw = self.extra.get(f"COURT_{name}")
        return default if raw is None else _float(f"COURT_{name}", raw, lo)

    def extra_int(self, name: str, default: int, lo: int = 0, hi: int = 2**31) -> int:
        raw = self.extra.get(f"COURT_{name}")
        return default if raw is None else _int(f"COURT_{name}", raw, lo, hi)

    def nats_servers(self) -> list[str]:
        return [u.strip() for u in self.nats_url.split(",") if u.strip()]
