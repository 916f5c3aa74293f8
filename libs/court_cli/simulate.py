"""``court simulate``: complete online games through the public path, as many at once as asked.

The data source of the analytics lake on a fresh machine and the load test of the whole stack.
Nothing is privileged: each of the ``concurrency`` workers registers an ordinary account with the
lobby (``CreateAccount``), then plays its share of the ``games`` one after another:

* ``CreateLobby`` (online, so the lobby registers the game with the ranking service and rank
  points move), ``SetBotSeat`` for every other seat (levels taken in turn from ``levels``, so the
  lake holds games of every level against every other), ``StartGame``;
* it plays its own seat as any client would: ``WatchGame`` for its view and, on each of its turns,
  the bot service's ``Suggest`` (at ``host_level``) for the move, sent with ``SubmitAction``. The
  bot seats are played by the bot service itself;
* the game is over when the watched view says ``finished``.

Reported: games and moves (every move of every game, bots' included: the final view's ``seq``)
per second of wall clock, and the latency of this client's ``SubmitAction`` calls (p50, p99).
A game that fails (a service away for longer than the clients' retries) is counted and named,
never retried under another id, so the figures only count complete games.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .ingest import STREAM, IngestProbe, IngestReport

if TYPE_CHECKING:  # the gRPC clients are imported when a simulation runs (`court --help` stays light)
    from court_proto.court.rules.v1 import rules_pb2

    from .session import Endpoints

# The options each game is played with (the lobby's defaults otherwise); the four in turn by default.
GAME_OPTIONS: dict[str, dict[str, Any]] = {
    "queens_court": {"players": 4},
    "hearts": {},
    "the_court": {},
    "court_wars": {},
}
DEFAULT_LEVELS = ("random", "heuristic")
SIGN_UPS_AT_ONCE = 2
SIGN_UP_TIMEOUT = 60.0


@dataclass
class SimConfig:
    games: int
    concurrency: int
    game_names: Sequence[str] = tuple(GAME_OPTIONS)
    levels: Sequence[str] = DEFAULT_LEVELS
    host_level: str = "random"
    suggest_timeout: float = 30.0


@dataclass
class GamePlayed:
    game: str
    game_id: str
    moves: int
    seconds: float


@dataclass
class SimResult:
    played: list[GamePlayed] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # one sentence per failed game
    submit_ms: list[float] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def moves(self) -> int:
        return sum(g.moves for g in self.played)

    def percentile(self, q: float) -> float:
        """Nearest-rank percentile of the submit latencies, in milliseconds (0 when none)."""
        if not self.submit_ms:
            return 0.0
        ordered = sorted(self.submit_ms)
        rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
        return ordered[rank - 1]

    def summary(self) -> dict[str, float | int]:
        secs = self.seconds or 1e-9
        return {
            "games": len(self.played),
            "failed": len(self.failed),
            "moves": self.moves,
            "seconds": round(self.seconds, 2),
            "games_per_s": round(len(self.played) / secs, 2),
            "moves_per_s": round(self.moves / secs, 1),
            "submits": len(self.submit_ms),
            "submit_p50_ms": round(self.percentile(50), 2),
            "submit_p99_ms": round(self.percentile(99), 2),
        }


class _Player:
    """One worker's account and its clients (its own channels, as separate users would have)."""

    def __init__(self, endpoints: Endpoints):
        from court_client import BotClient, LobbyClient, RulesClient

        self.lobby = LobbyClient(endpoints.lobby, retries=6)
        self.rules = RulesClient(endpoints.rules, "", retries=8)
        self.bot = BotClient(endpoints.bot, retries=4)
        self.player_id = ""

    def _token(self, token: str) -> None:
        self.lobby.token = self.bot.token = token
        self.rules.token = token

    async def register(self, gate: asyncio.Semaphore) -> None:
        """A new account. Hashing its password (argon2id) is the lobby's costliest call, so sign-ups
        pass ``gate`` a few at a time; one that times out is tried again under a new name (the
        lost one may exist, unused)."""
        import grpc
        from court_proto.court.lobby.v1 import lobby_pb2 as lpb

        password = secrets.token_urlsafe(18)
        for attempt in range(5):
            name = f"Sim {secrets.token_hex(4)}"
            try:
                async with gate:
                    auth = await self.lobby._call(
                        self.lobby.stub.CreateAccount,
                        lpb.CreateAccountRequest(name=name, password=password),
                        frozenset(),
                        timeout=SIGN_UP_TIMEOUT,
                    )
            except grpc.aio.AioRpcError as err:
                if err.code() == grpc.StatusCode.ALREADY_EXISTS or (
                    err.code() == grpc.StatusCode.DEADLINE_EXCEEDED and attempt < 2
                ):
                    continue
                raise
            self._token(auth.token)
            self.refresh_token = auth.refresh_token
            self.player_id = auth.account.player_id
            self.signed_at = time.monotonic()
            return
        raise RuntimeError("could not register a simulation account: every name tried is taken")

    async def keep_signed_in(self) -> None:
        """Tokens live an hour (COURT_TOKEN_TTL): trade for a fresh one every half hour of a long run."""
        if time.monotonic() - self.signed_at > 1800:
            auth = await self.lobby.refresh(self.refresh_token)
            self._token(auth.token)
            self.refresh_token = auth.refresh_token
            self.signed_at = time.monotonic()

    async def close(self) -> None:
        for c in (self.lobby, self.rules, self.bot):
            await c.close()


async def _play_one(
    p: _Player,
    game: str,
    levels: Sequence[str],
    cfg: SimConfig,
    submit_ms: list[float],
    on_move: Callable[[], None],
) -> GamePlayed:
    import grpc

    started = time.monotonic()
    await p.keep_signed_in()
    room = await p.lobby.create_lobby(game, GAME_OPTIONS.get(game, {}), online=True)
    for level in itertools.islice(itertools.cycle(levels), len(room.seats) - 1):
        room = await p.lobby.set_bot(room.lobby_id, level)
    room = await p.lobby.start(room.lobby_id)
    game_id = room.game_id
    last: rules_pb2.GameView | None = None
    async for update in p.rules.watch(game_id):
        view = update.view
        last = view
        on_move()
        if view.finished:
            break
        seat = view.your_seat
        if seat not in view.to_act or not view.legal_actions:
            continue
        try:
            act = (
                await p.bot.suggest(game_id, seat, cfg.host_level, timeout=cfg.suggest_timeout, view=view)
            ).action
        except grpc.aio.AioRpcError as err:
            if err.code() == grpc.StatusCode.FAILED_PRECONDITION:
                continue  # the position moved on meanwhile; the next update asks again
            raise
        t0 = time.perf_counter()
        try:
            await p.rules.submit(game_id, act, seat, request_id=f"sim-{game_id}-{view.seq}-{seat}")
        except grpc.aio.AioRpcError as err:
            if err.code() != grpc.StatusCode.FAILED_PRECONDITION:
                raise
        submit_ms.append((time.perf_counter() - t0) * 1000)
    if last is None or not last.finished:
        raise RuntimeError(f"the watch of game {game_id} ended before the game did")
    return GamePlayed(game, game_id, int(last.seq), time.monotonic() - started)


async def simulate(
    endpoints: Endpoints,
    cfg: SimConfig,
    *,
    on_game: Callable[[GamePlayed | str], None] | None = None,
    on_move: Callable[[], None] | None = None,
    on_signed_up: Callable[[], None] | None = None,
) -> SimResult:
    """Play ``cfg.games`` complete online games with ``cfg.concurrency`` players at once;
    ``on_signed_up`` is called once every player has its account (``make bench ONLY=stack`` starts
    measuring there: the sign-ups' password hashing is not a cost per move)."""
    import grpc

    if cfg.games < 1 or cfg.concurrency < 1:
        raise ValueError("games and concurrency must be at least 1")
    result = SimResult()
    todo = iter(range(cfg.games))
    tick = on_move or (lambda: None)
    done = on_game or (lambda _g: None)

    gate = asyncio.Semaphore(SIGN_UPS_AT_ONCE)
    n_workers = min(cfg.concurrency, cfg.games)
    signed = [0]

    async def worker() -> None:
        p = _Player(endpoints)
        try:
            await p.register(gate)
            signed[0] += 1
            if signed[0] == n_workers and on_signed_up is not None:
                on_signed_up()
            for i in todo:  # a shared iterator: each index is taken by one worker
                game = cfg.game_names[i % len(cfg.game_names)]
                levels = [cfg.levels[(i + k) % len(cfg.levels)] for k in range(len(cfg.levels))]
                try:
                    played = await _play_one(p, game, levels, cfg, result.submit_ms, tick)
                except (grpc.aio.AioRpcError, RuntimeError) as err:
                    what = (
                        f"{err.code().name}: {err.details()}"
                        if isinstance(err, grpc.aio.AioRpcError)
                        else str(err)
                    )
                    result.failed.append(f"game {i + 1} ({game}): {what}")
                    done(result.failed[-1])
                    continue
                result.played.append(played)
                done(played)
        finally:
            await p.close()

    t0 = time.monotonic()
    workers = [asyncio.create_task(worker()) for _ in range(n_workers)]
    try:
        outcomes = await asyncio.gather(*workers, return_exceptions=True)
    finally:
        for w in workers:
            w.cancel()
    result.seconds = time.monotonic() - t0
    for o in outcomes:
        if isinstance(o, grpc.aio.AioRpcError):
            result.failed.append(f"a player could not sign up: {o.code().name}: {o.details()}")
        elif isinstance(o, BaseException):
            raise o
    return result


# ---------------------------------------------------------------------------- the command


async def _start_probe(endpoints: Endpoints, out: Any, *, quiet: bool) -> IngestProbe | None:
    """The stream/lake probe of the run (court_cli.ingest), or None with a note when NATS cannot be
    read (the games are played either way)."""
    from .session import nats_credentials

    user, password = nats_credentials()
    probe = IngestProbe(endpoints.nats_url, user, password)
    try:
        await probe.start()
    except Exception as exc:  # noqa: BLE001 - no NATS figures; the simulation itself goes on
        if not quiet:
            out.print(
                f"no publish/ingest figures: cannot read {STREAM} at {endpoints.nats_url} "
                f"({str(exc)[:120] or type(exc).__name__})",
                style="dim",
            )
        return None
    if probe.why and not quiet:
        out.print(f"no ingest figure: {probe.why}", style="dim")
    return probe


def command(
    games: Annotated[int, typer.Option(help="complete games to play")] = 200,
    concurrency: Annotated[int, typer.Option(help="players playing at once (one game each)")] = 32,
    game: Annotated[
        list[str] | None,
        typer.Option(
            "--game",
            help="queens_court, hearts, the_court, court_wars (repeatable; default: the four in turn)",
        ),
    ] = None,
    level: Annotated[
        list[str] | None,
        typer.Option(
            "--level",
            help="bot levels for the bot seats, in turn (repeatable; default: random and heuristic)",
        ),
    ] = None,
    host_level: Annotated[
        str, typer.Option(help="the level whose Suggest plays the players' own seats")
    ] = "random",
    json_out: Annotated[bool, typer.Option("--json", help="the figures as one JSON line")] = False,
    ingest_wait: Annotated[
        float,
        typer.Option(
            help="after the games, wait up to this many seconds for court-analytics to land every record "
            "(the ingest rate is measured either way; 0: do not wait)"
        ),
    ] = 120.0,
) -> None:
    """Play complete online games through the public APIs (accounts, lobbies, bots, rules, ranking) and
    report games/s, moves/s and SubmitAction latency: the lake's data source and the stack's load test."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.text import Text

    from .catalog import LEVELS
    from .session import Endpoints
    from .termio import console

    out, fancy = console()
    names = list(game or GAME_OPTIONS)
    bad = [g for g in names if g not in GAME_OPTIONS]
    if bad or games < 1 or concurrency < 1 or any(lv not in LEVELS for lv in (*(level or ()), host_level)):
        why = (
            f"unknown game {bad[0]!r}; games: {', '.join(GAME_OPTIONS)}"
            if bad
            else "--games and --concurrency must be at least 1"
            if games < 1 or concurrency < 1
            else f"bot levels are {', '.join(LEVELS)}"
        )
        out.print(Text(f"court: {why}", style="bold red"))
        raise typer.Exit(2)
    cfg = SimConfig(
        games=games,
        concurrency=concurrency,
        game_names=names,
        levels=list(level or DEFAULT_LEVELS),
        host_level=host_level,
    )
    endpoints = Endpoints.from_env()
    moves = [0]
    ingest: list[IngestReport] = []

    async def main() -> SimResult:
        probe = await _start_probe(endpoints, out, quiet=json_out)
        try:
            result = await _play()
            if probe is not None:
                if not json_out:
                    out.print(
                        f"waiting up to {ingest_wait:.0f}s for court-analytics to land the last records",
                        style="dim",
                    )
                ingest.append(await probe.finish(wait=max(0.0, ingest_wait)))
            return result
        finally:
            if probe is not None:
                await probe.close()

    async def _play() -> SimResult:
        with Progress(
            TextColumn("[bold]simulate"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("games"),
            TextColumn("{task.fields[moves]} moves in finished games · {task.fields[failed]} failed"),
            TimeElapsedColumn(),
            console=out,
            disable=not fancy,
            transient=False,
        ) as bar:
            task = bar.add_task("games", total=games, moves=0, failed=0)
            failed = [0]

            def on_game(g: GamePlayed | str) -> None:
                if isinstance(g, str):
                    failed[0] += 1
                    if not fancy:
                        out.print(f"failed: {g}")
                else:
                    moves[0] += g.moves  # every move of the game, bots' included, as the summary counts
                    if not fancy:
                        out.print(f"game {g.game_id} ({g.game}): {g.moves} moves in {g.seconds:.1f}s")
                bar.update(task, advance=1, failed=failed[0], moves=moves[0])

            return await simulate(endpoints, cfg, on_game=on_game)

    try:
        result = asyncio.run(main())
    except KeyboardInterrupt:
        out.print(Text("interrupted", style="dim"))
        raise typer.Exit(130) from None
    s: dict[str, Any] = dict(result.summary())
    if ingest:
        s["ingest"] = ingest[0].summary()
    if json_out:
        out.print(json.dumps(s), soft_wrap=True, highlight=False)
    else:
        out.print(
            f"{s['games']} games ({s['failed']} failed), {s['moves']} moves in {s['seconds']}s: "
            f"{s['games_per_s']} games/s, {s['moves_per_s']} moves/s; SubmitAction p50 "
            f"{s['submit_p50_ms']} ms, p99 {s['submit_p99_ms']} ms over {s['submits']} calls",
            highlight=False,
        )
        if ingest:
            out.print(ingest[0].line(), highlight=False, soft_wrap=True)
    for line in result.failed[:10]:
        out.print(Text(f"  {line}", style="red"))
    if result.failed:
        raise typer.Exit(1)
