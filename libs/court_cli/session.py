"""Where the services are, who is signed in, and one place that turns gRPC errors into sentences.

Addresses: ``COURT_RULES_ADDR``, ``COURT_LOBBY_ADDR``, ``COURT_RANKING_ADDR``, ``COURT_BOT_ADDR``
and ``COURT_NATS_URL`` when set; otherwise those of the stack ``court stack up`` is running on
``$COURT_STATE_DIR`` (default ``.state``, read from its ``stack.json``); otherwise the defaults
(127.0.0.1:50051..50054, nats://127.0.0.1:4222).

The session (token, refresh token, name) is saved per lobby address in
``$COURT_CONFIG_DIR/session.json`` (default ``~/.config/court``), readable by its owner only.
An expired token is traded for a new one with the refresh token, once, transparently.
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import grpc
from court_client.services import BotClient, LobbyClient, RankingClient
from court_kit.settings import GRPC_PORTS
from court_proto.court.lobby.v1 import lobby_pb2 as lpb

from .catalog import STACK_FILE, court_command

if TYPE_CHECKING:  # loaded when a game is shown: the rules client, the games' typed views, rich
    from court_client.rules import RulesClient
    from court_proto.court.rules.v1 import rules_pb2

    from .render import Names

T = TypeVar("T")
SERVICES = ("rules", "lobby", "ranking", "bot")
GUESTS_KEY = "kept guests"


class CliError(Exception):
    """Something to tell the person, without a traceback; exit status 1."""


class LeftTable(Exception):  # noqa: N818 - not an error: the person pressed Ctrl-C at the table
    """Ctrl-C at the table, after the table said the game is saved and how to resume it; exit status 130."""


@dataclass(frozen=True)
class Endpoints:
    rules: str
    lobby: str
    ranking: str
    bot: str
    nats_url: str
    source: str = "defaults"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Endpoints:
        env = os.environ if environ is None else environ
        addrs = {s: f"127.0.0.1:{GRPC_PORTS[s]}" for s in SERVICES}
        nats_url = "nats://127.0.0.1:4222"
        source = "defaults"
        state = Path(env.get("COURT_STATE_DIR", ".state"))
        stack_file = state / STACK_FILE
        try:
            running = json.loads(stack_file.read_text())
            addrs.update({s: running["services"][s]["address"] for s in SERVICES})
            nats_url = running.get("nats_url", nats_url)
            source = str(stack_file)
        except (OSError, ValueError, KeyError, TypeError):
            pass
        for s in SERVICES:
            if env.get(f"COURT_{s.upper()}_ADDR"):
                addrs[s] = env[f"COURT_{s.upper()}_ADDR"]
                source = "environment"
        nats_url = env.get("COURT_NATS_URL", nats_url)
        return cls(nats_url=nats_url, source=source, **addrs)


def nats_credentials(environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """The NATS identity ``court events`` reads as: COURT_NATS_USER/PASSWORD, else the local stack's
    ``analytics`` user (``<state>/keys/nats-users.json``), else none."""
    env = os.environ if environ is None else environ
    if env.get("COURT_NATS_USER"):
        return env["COURT_NATS_USER"], env.get("COURT_NATS_PASSWORD", "")
    try:
        users = json.loads(
            (Path(env.get("COURT_STATE_DIR", ".state")) / "keys" / "nats-users.json").read_text()
        )
        return "analytics", str(users["analytics"])
    except (OSError, ValueError, KeyError, TypeError):
        return "", ""


def config_dir(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    if env.get("COURT_CONFIG_DIR"):
        return Path(env["COURT_CONFIG_DIR"])
    base = Path(env.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "court"


class SessionStore:
    """Signed-in sessions, one per lobby address, in one JSON file."""

    def __init__(self, path: Path):
        self.path = path

    def _all(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    def load(self, lobby: str) -> dict[str, Any] | None:
        return self._all().get(lobby)

    def save(self, lobby: str, session: Mapping[str, Any]) -> None:
        data = self._all()
        data[lobby] = dict(session)
        self._write(data)

    def clear(self, lobby: str) -> None:
        data = self._all()
        if data.pop(lobby, None) is not None:
            self._write(data)

    def _write(self, data: Mapping[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2)
        os.replace(tmp, self.path)

    # Guests a person signed away from (by registering, logging in or out): kept, so that their saved
    # games stay reachable with ``court guest NAME``.
    def guests(self, lobby: str) -> dict[str, dict[str, Any]]:
        kept = self._all().get(GUESTS_KEY, {})
        found = kept.get(lobby, {}) if isinstance(kept, dict) else {}
        return found if isinstance(found, dict) else {}

    def keep_guest(self, lobby: str, session: Mapping[str, Any]) -> None:
        data = self._all()
        kept = data.setdefault(GUESTS_KEY, {})
        kept.setdefault(lobby, {})[session["name"]] = dict(session)
        self._write(data)

    def forget_guest(self, lobby: str, name: str) -> None:
        data = self._all()
        if data.get(GUESTS_KEY, {}).get(lobby, {}).pop(name, None) is not None:
            self._write(data)


def explain(err: grpc.aio.AioRpcError | grpc.RpcError, service: str = "", address: str = "") -> str:
    """A gRPC error as a sentence a player can act on."""
    code = err.code()
    details = err.details() or ""
    if code == grpc.StatusCode.UNAVAILABLE:
        where = f" the {service} service" if service else " a service"
        at = f" at {address}" if address else ""
        return f"cannot reach{where}{at}: is the stack running? Start it with `make run`."
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return f"the {service or 'service'} did not answer in time; try again"
    if code == grpc.StatusCode.UNAUTHENTICATED:
        c = court_command()
        return f"{details} (sign in with `{c} login NAME`, or `{c} register NAME`)"
    return details or code.name


def session_from_auth(auth: lpb.AuthResponse) -> dict[str, Any]:
    return {
        "player_id": auth.account.player_id,
        "name": auth.account.name,
        "guest": auth.account.guest,
        "token": auth.token,
        "refresh_token": auth.refresh_token,
    }


class Court:
    """One person's connection to the services (court_client's clients) and their session."""

    def __init__(
        self,
        endpoints: Endpoints | None = None,
        store: SessionStore | None = None,
        session: Mapping[str, Any] | None = None,
    ):
        self.endpoints = endpoints or Endpoints.from_env()
        self.store = store
        self.session: dict[str, Any] | None = (
            dict(session) if session else (store.load(self.endpoints.lobby) if store else None)
        )
        token = self.session["token"] if self.session else None
        self._token = token
        self.lobby = LobbyClient(self.endpoints.lobby, token, retries=3)
        self.ranking = RankingClient(self.endpoints.ranking, token, retries=3)
        self.bot = BotClient(self.endpoints.bot, token, retries=2)
        self._rules: RulesClient | None = None
        self._accounts: dict[str, str] = {}

    @property
    def rules(self) -> RulesClient:
        """The rules service's client, made when first used (it loads the games' typed actions, views
        and events, which `court whoami` or `court lobby list` never need)."""
        if self._rules is None:
            from court_client.rules import RulesClient

            self._rules = RulesClient(self.endpoints.rules, self._token or "", retries=4)
        return self._rules

    async def close(self) -> None:
        for c in (self.lobby, self.ranking, self.bot, self._rules):
            if c is not None:
                await c.close()

    async def __aenter__(self) -> Court:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ session

    @property
    def signed_in(self) -> bool:
        return bool(self.session and self.session.get("token"))

    @property
    def me(self) -> str:
        return self.session["player_id"] if self.session else ""

    @property
    def my_name(self) -> str:
        return self.session["name"] if self.session else ""

    def _set_token(self, token: str | None) -> None:
        self._token = token
        self.lobby.token = self.ranking.token = self.bot.token = token
        if self._rules is not None:
            self._rules.token = token or ""

    def adopt(self, auth: lpb.AuthResponse) -> None:
        """Sign in with an auth answer (login, register, guest, refresh) and save it; a guest signed in
        before, if it is someone else, is kept (``court guest NAME`` signs in as it again)."""
        if auth.account.player_id != self.me:
            self._keep_guest()
        self.session = session_from_auth(auth)
        self._set_token(auth.token)
        if self.store is not None:
            self.store.save(self.endpoints.lobby, self.session)

    def _keep_guest(self) -> None:
        if (
            self.store is not None
            and self.session
            and self.session.get("guest")
            and self.session.get("refresh_token")
        ):
            self.store.keep_guest(self.endpoints.lobby, self.session)

    async def sign_in_kept_guest(self, name: str) -> bool:
        """Sign in again as a guest kept by ``adopt``/``sign_out`` (its refresh token); False if none is kept
        under that name or its refresh token no longer works."""
        kept = self.store.guests(self.endpoints.lobby).get(name) if self.store is not None else None
        if not kept:
            return False
        try:
            auth = await self.lobby.refresh(kept["refresh_token"])
        except grpc.aio.AioRpcError:
            return False
        self.adopt(auth)
        if self.store is not None:
            self.store.forget_guest(self.endpoints.lobby, auth.account.name)
        return True

    def sign_out(self) -> None:
        self._keep_guest()
        self.session = None
        self._set_token(None)
        if self.store is not None:
            self.store.clear(self.endpoints.lobby)

    async def refresh(self) -> bool:
        if not self.session or not self.session.get("refresh_token"):
            return False
        try:
            auth = await self.lobby.refresh(self.session["refresh_token"])
        except grpc.aio.AioRpcError:
            return False
        self.adopt(auth)
        return True

    def _service_of(self, fn: Any) -> tuple[str, str]:
        owner = getattr(fn, "__self__", None)
        for name in SERVICES:
            if owner is getattr(self, "_rules" if name == "rules" else name):
                return name, getattr(self.endpoints, name)
        return "", ""

    async def call(self, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        """Call a client method; refresh an expired token once; errors become ``CliError``."""
        for attempt in (0, 1):
            try:
                return await fn(*args, **kwargs)
            except grpc.aio.AioRpcError as err:
                if err.code() == grpc.StatusCode.UNAUTHENTICATED and attempt == 0 and await self.refresh():
                    continue
                said = explain(err, *self._service_of(fn))
                if err.code() == grpc.StatusCode.UNAVAILABLE and self.endpoints.source == "defaults":
                    said += (
                        f" (No stack.json under {os.environ.get('COURT_STATE_DIR', '.state')}/, so the default "
                        "ports were tried: a stack started with another state folder needs the same "
                        "COURT_STATE_DIR here, e.g. `make play COURT_STATE_DIR=...`.)"
                    )
                raise CliError(said) from None
        raise AssertionError("unreachable")

    async def require(self, *, account: bool = False) -> None:
        """Signed in (``account``: with a registered account, not a guest), or ``CliError`` saying how."""
        if not self.signed_in:
            raise CliError(
                f"you are not signed in: `{court_command()} register NAME` (or `{court_command()} login NAME`)"
            )
        if account and self.session and self.session.get("guest"):
            raise CliError(
                f"guest accounts play local games only; create an account with `{court_command()} register NAME`"
            )

    async def ensure_guest(self, name: str) -> None:
        """Signed in, as a guest named ``name`` (or a variant of it) when nobody is."""
        if self.signed_in:
            return
        for candidate in (name, *(f"{name} {i}" for i in range(2, 10))):
            try:
                self.adopt(await self.lobby.create_guest(candidate))
                return
            except grpc.aio.AioRpcError as err:
                if err.code() != grpc.StatusCode.ALREADY_EXISTS:
                    raise CliError(explain(err, "lobby", self.endpoints.lobby)) from None
        self.adopt(await self.call(self.lobby.create_guest, ""))

    # ------------------------------------------------------------------ names

    async def names_for(self, view: rules_pb2.GameView) -> Names:
        from .render import BOT_PREFIX, Names

        people = [p for p in view.seats if not p.startswith(BOT_PREFIX) and p not in self._accounts]
        for pid in people:
            if pid == self.me:
                self._accounts[pid] = self.my_name
                continue
            try:
                acc = await self.lobby.account(pid)
                self._accounts[pid] = acc.name
            except grpc.aio.AioRpcError:
                self._accounts[pid] = pid[:8]
        you = view.your_seat if view.HasField("your_seat") else None
        return Names.build(list(view.seats), self._accounts, you)
