"""``court``: the terminal client of Court, and ``court stack up``, the local stack ``make run`` starts.

A plain gRPC client of the services through court_client: it holds a player's token and
nothing more. ``court --help`` lists the commands; every command explains its errors in a
sentence (a traceback only with ``COURT_DEBUG=1``).

Imports are lazy: at module level only typer, the standard library and ``catalog``, so that
``court --help`` and a password prompt answer at once; each command imports what it uses
(gRPC, protobuf, rich, the engines) when it runs (tests/cli/test_catalog.py checks it).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, cast

import typer

from .catalog import GAME_NAMES, GAME_TITLES, LEVELS, OBJECTIVES, OPTIONS, court_command, event_types, plural
from .startup import ready_values_skip_pydantic

ready_values_skip_pydantic()

if TYPE_CHECKING:  # bound at run time by _load(), when a command runs
    import asyncio
    import signal

    import grpc
    from court_proto.court.lobby.v1 import lobby_pb2 as lpb
    from court_proto.court.ranking.v1 import ranking_pb2 as rpb
    from rich.console import Console
    from rich.table import Table as RichTable
    from rich.text import Text

    from .session import CliError, Court, Endpoints
    from .stack import LocalStack, StackConfig

T = TypeVar("T")

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    help="Court: play Queen's Court, Hearts, The Court and Court Wars against bots or people.",
)
lobby_app = typer.Typer(no_args_is_help=True, help="Lobbies: list, create, join, seat bots, start.")
events_app = typer.Typer(no_args_is_help=True, help="The public game event stream.")
stack_app = typer.Typer(no_args_is_help=True, help="The local stack: NATS and every Court service.")
admin_app = typer.Typer(no_args_is_help=True, help="Operators: checks across a deployment (an admin token).")
api_app = typer.Typer(
    no_args_is_help=True,
    help="Talk to the services' gRPC APIs directly, through server "
    "reflection: list services and methods, call a method with JSON.",
)
app.add_typer(lobby_app, name="lobby")
app.add_typer(events_app, name="events")
app.add_typer(stack_app, name="stack")
app.add_typer(api_app, name="api")
app.add_typer(admin_app, name="admin")


def _load() -> None:
    """Bind the heavy modules the commands use (asyncio, gRPC, protobuf, rich, the client session) as this
    module's globals, once, when a command runs rather than when ``court --help`` is asked."""
    if "Text" in globals():
        return
    import asyncio
    import signal

    import grpc
    from court_proto.court.lobby.v1 import lobby_pb2 as lpb
    from court_proto.court.ranking.v1 import ranking_pb2 as rpb
    from rich.console import Console
    from rich.table import Table as RichTable
    from rich.text import Text

    from .session import CliError, Court, Endpoints

    globals().update(
        asyncio=asyncio,
        signal=signal,
        grpc=grpc,
        lpb=lpb,
        rpb=rpb,
        Console=Console,
        RichTable=RichTable,
        Text=Text,
        CliError=CliError,
        Court=Court,
        Endpoints=Endpoints,
    )


def state_name(state: int) -> str:
    return (
        lpb.LobbyState.Name(cast("lpb.LobbyState.ValueType", state)).removeprefix("LOBBY_STATE_").lower()
        if state in lpb.LobbyState.values()
        else "?"
    )


@app.callback()
def _main(
    plain: Annotated[bool, typer.Option("--plain", help="plain text: no colours, no live tables")] = False,
) -> None:
    OPTIONS["plain"] = plain


# ---------------------------------------------------------------------------- plumbing


def console() -> tuple[Console, bool]:
    from .termio import console as make

    _load()
    return make()


def run(body: Callable[[Court, Console, bool], Awaitable[T]]) -> T:
    """Run an async command body with a signed-in-or-not ``Court``; errors become one red line."""
    from .session import LeftTable, SessionStore, config_dir

    out, fancy = console()

    async def main() -> T:
        async with Court(Endpoints.from_env(), SessionStore(config_dir() / "session.json")) as court:
            return await body(court, out, fancy)

    try:
        return asyncio.run(main())
    except LeftTable:  # Ctrl-C at the table: the table has said the game is saved and how to go on
        raise typer.Exit(130) from None
    except CliError as exc:
        out.print(Text(f"court: {exc}", style="bold red"), soft_wrap=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        out.print(Text("interrupted", style="dim"))
        raise typer.Exit(130) from None
    except typer.Exit:
        raise
    except Exception as exc:  # noqa: BLE001 - a person sees a sentence, a developer sets COURT_DEBUG
        if os.environ.get("COURT_DEBUG"):
            raise
        out.print(
            Text(
                f"court: unexpected error: {type(exc).__name__}: {exc} (COURT_DEBUG=1 shows the traceback)",
                style="bold red",
            )
        )
        raise typer.Exit(1) from None


def parse_options(game: str, pairs: list[str] | None) -> dict[str, Any]:
    """``--option players=3 --option mode=free_gift`` as the game's options (checked by the engine)."""
    if game not in GAME_NAMES:
        raise CliError(f"unknown game {game!r}; games: {', '.join(GAME_NAMES)}")
    out: dict[str, Any] = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CliError(f"an option is KEY=VALUE, got {pair!r}")
        v: Any = value
        if value.lower() in ("true", "false"):
            v = value.lower() == "true"
        elif value.lstrip("-").isdigit():
            v = int(value)
        out[key] = v
    from court_games.registry import get_game

    module = get_game(game)
    try:
        module.options_from_dict(out)
    except Exception as exc:  # noqa: BLE001 - the engine's InvalidOptions says what is allowed
        raise CliError(str(exc)) from None
    return out


def check_level(level: str) -> str:
    if level not in LEVELS:
        raise CliError(f"unknown bot level {level!r}; levels: {', '.join(LEVELS)}")
    return level


def lobby_table(lobbies: list[lpb.Lobby]) -> RichTable:
    t = RichTable(box=None, pad_edge=False)
    for col in ("lobby", "game", "mode", "ante", "seats", "state", "game id"):
        t.add_column(col)
    for lb in lobbies:
        taken = sum(1 for s in lb.seats if s.player_id)
        t.add_row(
            lb.lobby_id,
            GAME_TITLES.get(lb.game, lb.game),
            "online" if lb.online else "local",
            str(lb.ante),
            f"{taken}/{len(lb.seats)}",
            state_name(lb.state),
            lb.game_id or "",
        )
    return t


def clock_words(lb: lpb.Lobby) -> str:
    """The lobby's turn clock in words (docs/clock.md)."""
    if not lb.turn_seconds:
        return "no turn clock"
    bank = f" + a {lb.time_bank_seconds} s bank per game" if lb.time_bank_seconds else ""
    return f"turn clock: {lb.turn_seconds} s a turn{bank}; the {lb.autoplay_level or 'heuristic'} bot plays a seat whose time runs out"


def show_lobby(out: Console, lb: lpb.Lobby) -> None:
    out.print(
        Text(
            f"Lobby {lb.lobby_id}: {GAME_TITLES.get(lb.game, lb.game)}, "
            f"{'online' if lb.online else 'local'}, ante {lb.ante}, {state_name(lb.state)}"
            + (f", invite code {lb.invite_code}" if lb.invite_code else "")
            + (f", game {lb.game_id}" if lb.game_id else ""),
            style="bold",
        )
    )
    out.print(f"  {clock_words(lb)}")
    if lb.start_error:
        out.print(f"  {lb.start_error}")
    for s in lb.seats:
        who = s.name or s.player_id or "(open)"
        out.print(f"  seat {s.seat}: {who}" + (" (host)" if s.player_id and s.player_id == lb.host else ""))


async def fill_and_start(court: Court, out: Console, lb: lpb.Lobby, level: str) -> lpb.Lobby:
    """The host seats bots in every open seat and starts the game."""
    for s in lb.seats:
        if not s.player_id:
            lb = await court.call(court.lobby.set_bot, lb.lobby_id, level, seat=s.seat)
    lb = await court.call(court.lobby.start, lb.lobby_id)
    people = [s.name for s in lb.seats if not s.player_id.startswith("bot:")]
    bots = len(lb.seats) - len(people)
    out.print(
        Text(
            f"Game {lb.game_id} started: {', '.join(people)}"
            + (f" and {plural(bots, 'bot')}" if bots else ""),
            style="bold",
        )
    )
    return lb


async def sit_and_play(court: Court, out: Console, fancy: bool, game_id: str, level: str = "") -> str:
    from .play import Table
    from .termio import LineReader

    table = Table(court, out, fancy, LineReader(), level=level)
    return await table.play(game_id)


async def wait_started(court: Court, out: Console, lb: lpb.Lobby, wait: float, level: str) -> lpb.Lobby:
    """Wait for the lobby's game: as host, for others up to ``wait`` seconds, then bots fill the rest."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    said = False
    while lb.state in (lpb.LOBBY_STATE_OPEN, lpb.LOBBY_STATE_STARTING):
        open_seats = sum(1 for s in lb.seats if not s.player_id)
        if (
            lb.host == court.me
            and lb.state == lpb.LOBBY_STATE_OPEN
            and (open_seats == 0 or loop.time() >= deadline)
        ):
            return await fill_and_start(court, out, lb, level)
        if not said:
            out.print(
                Text(
                    f"Waiting for players in lobby {lb.lobby_id} ({plural(open_seats, 'open seat')})"
                    + (
                        f"; bots fill them in {wait:.0f}s"
                        if lb.host == court.me
                        else "; the host starts the game"
                    ),
                    style="dim",
                )
            )
            said = True
        await asyncio.sleep(1.0)  # the lobby has no change stream: look again each second
        lb = await court.call(court.lobby.get_lobby, lb.lobby_id)
    if lb.state != lpb.LOBBY_STATE_STARTED:
        raise CliError(f"lobby {lb.lobby_id} is {state_name(lb.state)}: no game to play")
    return lb


# ---------------------------------------------------------------------------- accounts


# The lobby's password rule (court_lobby.accounts.MIN_PASSWORD / MAX_PASSWORD), checked before the second
# prompt so that a person does not type a refused password twice; the lobby checks it again.
MIN_PASSWORD, MAX_PASSWORD = 8, 256


def ask_new_password() -> str:
    while True:
        password = typer.prompt(f"Password ({MIN_PASSWORD}+ characters)", hide_input=True)
        if not MIN_PASSWORD <= len(password) <= MAX_PASSWORD:
            typer.echo(
                f"A password has {MIN_PASSWORD} to {MAX_PASSWORD} characters (that one has "
                f"{len(password)}); try again."
            )
            continue
        if typer.prompt("Repeat for confirmation", hide_input=True) == password:
            return str(password)
        typer.echo("The two passwords differ; try again.")


async def guest_games_note(court: Court) -> str:
    """What happens to the signed-in guest's saved games when someone signs in instead (said before the
    switch, while the guest's token still reads them); "" when nobody or an account is signed in."""
    if not court.signed_in or not (court.session or {}).get("guest"):
        return ""
    guest = court.my_name
    try:
        mine = await court.lobby.my_games()
    except grpc.aio.AioRpcError:
        return (
            f"The guest {guest}'s saved games stay with the guest: `{court_command()} guest {_shell(guest)}` "
            "signs in as the guest again."
        )
    if not mine.games:
        return f"(You were playing as the guest {guest}, who has no unfinished games.)"
    listed = ", ".join(f"{GAME_TITLES.get(g.game, g.game)} {g.game_id}" for g in mine.games[:3]) + (
        ", ..." if len(mine.games) > 3 else ""
    )
    return (
        f"The guest {guest} has {plural(len(mine.games), 'unfinished game')} ({listed}). Guest games stay "
        f"with the guest, not with the account: `{court_command()} guest {_shell(guest)}` signs in as the "
        "guest again to resume them."
    )


def _shell(word: str) -> str:
    """A name as typed in a shell: quoted when it holds anything but letters, digits, '-' and '_'."""
    return (
        word
        if word and all(c.isalnum() or c in "-_" for c in word)
        else "'" + word.replace("'", "'\\''") + "'"
    )


@app.command()
def register(
    name: str, password: Annotated[str | None, typer.Option(help="prompted when left out")] = None
) -> None:
    """Create an account (needed for online play and rank points) and sign in."""
    if password is None:
        password = ask_new_password()

    async def body(court: Court, out: Console, fancy: bool) -> None:
        auth = await court.call(court.lobby.create_account, name, password)
        note = await guest_games_note(court)
        court.adopt(auth)
        bal = await court.call(court.ranking.balance)
        out.print(
            Text(
                f"Welcome, {court.my_name}! You hold {bal.points} rank points. Signed in.", style="bold green"
            )
        )
        if note:
            out.print(note, soft_wrap=True)

    run(body)


@app.command()
def login(
    name: str, password: Annotated[str | None, typer.Option(help="prompted when left out")] = None
) -> None:
    """Sign in; the token is saved for the next commands."""
    if password is None:
        password = typer.prompt("Password", hide_input=True)

    async def body(court: Court, out: Console, fancy: bool) -> None:
        auth = await court.call(court.lobby.login, name, password)
        note = await guest_games_note(court) if auth.account.player_id != court.me else ""
        court.adopt(auth)
        out.print(Text(f"Signed in as {court.my_name}.", style="bold green"))
        if note:
            out.print(note, soft_wrap=True)

    run(body)


@app.command()
def guest(
    name: Annotated[
        str,
        typer.Argument(
            help="empty: a generated name; the name of a guest you "
            "played as before signs in as that guest again"
        ),
    ] = "",
) -> None:
    """Sign in as a guest (local games only), or again as a guest you played as on this machine."""

    async def body(court: Court, out: Console, fancy: bool) -> None:
        if name and await court.sign_in_kept_guest(name):
            mine = await court.call(court.lobby.my_games)
            out.print(
                Text(
                    f"Signed in again as the guest {court.my_name} "
                    f"({plural(len(mine.games), 'unfinished game')}; `{court_command()} games` lists them).",
                    style="bold green",
                ),
                soft_wrap=True,
            )
            return
        court.sign_out()
        court.adopt(await court.call(court.lobby.create_guest, name))
        out.print(Text(f"Signed in as the guest {court.my_name}.", style="bold green"))

    run(body)


@app.command()
def logout() -> None:
    """Forget the saved token."""

    async def body(court: Court, out: Console, fancy: bool) -> None:
        court.sign_out()
        out.print("Signed out.")

    run(body)


@app.command()
def whoami() -> None:
    """Who is signed in, and where the services are."""

    async def body(court: Court, out: Console, fancy: bool) -> None:
        e = court.endpoints
        out.print(
            f"services ({e.source}): rules {e.rules}, lobby {e.lobby}, ranking {e.ranking}, bot {e.bot}, "
            f"NATS {e.nats_url}"
        )
        if not court.signed_in:
            out.print("not signed in")
            return
        await court.require()
        acc = await court.call(court.lobby.account)
        out.print(f"{acc.name} ({'guest' if acc.guest else 'account'}, id {acc.player_id})")

    run(body)


# ---------------------------------------------------------------------------- lobbies


@app.command("lobbies")
def list_lobbies(game: Annotated[str, typer.Option(help="only this game")] = "") -> None:
    """Open public lobbies."""

    async def body(court: Court, out: Console, fancy: bool) -> None:
        await court.require()
        found = await court.call(court.lobby.list_lobbies, game)
        if not found.lobbies:
            c = court_command()
            out.print(f"No open lobbies. Create one with `{c} lobby create GAME`, or `{c} quick GAME`.")
            return
        out.print(lobby_table(list(found.lobbies)))

    run(body)


@lobby_app.command("list")
def lobby_list(game: Annotated[str, typer.Option(help="only this game")] = "") -> None:
    """Open public lobbies."""
    list_lobbies(game)


@lobby_app.command("create")
def lobby_create(
    game: str,
    option: Annotated[
        list[str] | None, typer.Option("--option", "-o", help="KEY=VALUE, e.g. players=3")
    ] = None,
    online: Annotated[bool, typer.Option(help="online: rank points move (accounts only)")] = False,
    ante: Annotated[int, typer.Option(help="online Queen's Court: rank points each player stakes")] = 0,
    private: Annotated[bool, typer.Option(help="joined only with the invite code")] = False,
    bots: Annotated[bool, typer.Option(help="fill every other seat with bots")] = False,
    level: Annotated[str, typer.Option(help="bot level: random, heuristic, expert")] = "heuristic",
    start: Annotated[bool, typer.Option(help="start the game (with --bots)")] = False,
    play: Annotated[bool, typer.Option(help="sit down and play once it starts")] = True,
    turn_seconds: Annotated[
        int | None,
        typer.Option(help="turn clock: seconds a turn, 5-600 or 0 for none (default 45 online, 0 local)"),
    ] = None,
    time_bank: Annotated[
        int | None, typer.Option(help="turn clock: seconds of extra time each seat may draw on per game")
    ] = None,
) -> None:
    """Create a lobby (you host it, in seat 0)."""

    async def body(court: Court, out: Console, fancy: bool) -> None:
        options = parse_options(game, option)
        check_level(level)
        await court.require(account=online)
        lb = await court.call(
            court.lobby.create_lobby,
            game,
            options,
            ante=ante,
            online=online,
            private=private,
            turn_seconds=turn_seconds,
            time_bank_seconds=time_bank,
        )
        if bots:
            for s in lb.seats:
                if not s.player_id:
                    lb = await court.call(court.lobby.set_bot, lb.lobby_id, level, seat=s.seat)
        show_lobby(out, lb)
        if start:
            lb = await court.call(court.lobby.start, lb.lobby_id)
            out.print(Text(f"Game {lb.game_id} started.", style="bold"))
            if play:
                await sit_and_play(court, out, fancy, lb.game_id)
        else:
            c = court_command()
            code = f" --code {lb.invite_code}" if lb.invite_code else ""
            out.print(
                f"Others join with `{c} lobby join {lb.lobby_id}{code}`; start with "
                f"`{c} lobby start {lb.lobby_id}`."
            )

    run(body)


@lobby_app.command("show")
def lobby_show(lobby_id: str) -> None:
    """A lobby's seats and state."""

    async def body(court: Court, out: Console, fancy: bool) -> None:
        await court.require()
        show_lobby(out, await court.call(court.lobby.get_lobby, lobby_id))

    run(body)


@lobby_app.command("join")
def lobby_join(
    lobby_id: str,
    code: Annotated[str, typer.Option(help="a private lobby's invite code")] = "",
    play: Annotated[bool, typer.Option(help="wait for the start, then play")] = True,
) -> None:
    """Take a seat in a lobby."""

    async def body(court: Court, out: Console, fancy: bool) -> None:
        await court.require()
        lb = await court.call(court.lobby.join, lobby_id, invite_code=code)
        show_lobby(out, lb)
        if play:
            lb = await wait_started(court, out, lb, float("inf"), "heuristic")
            await sit_and_play(court, out, fancy, lb.game_id)

    run(body)


@lobby_app.command("leave")
def lobby_leave(lobby_id: str) -> None:
    """Give up your seat in a lobby that has not started."""

    async def body(court: Court, out: Console, fancy: bool) -> None:
        await court.require()
        show_lobby(out, await court.call(court.lobby.leave, lobby_id))

    run(body)


@lobby_app.command("cancel")
def lobby_cancel(
    lobby_id: str, reason: Annotated[str, typer.Option(help="shown to the lobby's members")] = ""
) -> None:
    """Cancel a lobby that has not started (host only): it closes, every ante taken is refunded."""

    async def body(court: Court, out: Console, fancy: bool) -> None:
        await court.require()
        try:
            lb = await court.call(court.lobby.cancel, lobby_id, reason)
        except CliError as refused:
            try:
                lb = await court.call(court.lobby.get_lobby, lobby_id)
            except CliError:
                raise refused from None
            if lb.state != lpb.LOBBY_STATE_STARTED:
                raise
            raise CliError(
                f"lobby {lobby_id}'s game {lb.game_id} has started: it can no longer be cancelled; a seated "
                f"player gives it up with `{court_command()} abandon {lb.game_id}`"
            ) from None
        show_lobby(out, lb)

    run(body)


@lobby_app.command("bot")
def lobby_bot(
    lobby_id: str,
    level: Annotated[
        str, typer.Option(help="random, heuristic, expert; 'none' removes the bot")
    ] = "heuristic",
    seat: Annotated[int | None, typer.Option(help="the seat (default: the first open one)")] = None,
) -> None:
    """Seat a bot (host only)."""

    async def body(court: Court, out: Console, fancy: bool) -> None:
        await court.require()
        lvl = "" if level == "none" else check_level(level)
        show_lobby(out, await court.call(court.lobby.set_bot, lobby_id, lvl, seat=seat))

    run(body)


@lobby_app.command("start")
def lobby_start(
    lobby_id: str,
    play: Annotated[bool, typer.Option(help="sit down and play")] = True,
    bots: Annotated[bool, typer.Option(help="fill open seats with bots first")] = False,
    level: Annotated[str, typer.Option(help="bot level for --bots")] = "heuristic",
) -> None:
    """Start the lobby's game (host only)."""

    async def body(court: Court, out: Console, fancy: bool) -> None:
        await court.require()
        if bots:
            lb = await fill_and_start(
                court, out, await court.call(court.lobby.get_lobby, lobby_id), check_level(level)
            )
        else:
            lb = await court.call(court.lobby.start, lobby_id)
            out.print(Text(f"Game {lb.game_id} started.", style="bold"))
        if play:
            await sit_and_play(court, out, fancy, lb.game_id)

    run(body)


# ---------------------------------------------------------------------------- playing


def choose_game() -> str:
    """``court play`` without a game: the games, numbered, and the person picks one (on a terminal);
    elsewhere the list and exit status 2."""
    lines = [f"  {i + 1}) {GAME_TITLES[g]:<14} {g:<13} {OBJECTIVES[g]}" for i, g in enumerate(GAME_NAMES)]
    if not sys.stdin.isatty():
        typer.echo(
            "Which game? Name one: " + court_command() + " play GAME, with GAME one of:\n" + "\n".join(lines)
        )
        raise typer.Exit(2)
    typer.echo("Which game? (a local game against bots)\n" + "\n".join(lines))
    while True:
        answer = typer.prompt(f"Game (1-{len(GAME_NAMES)} or its name)").strip().lower()
        if answer.isdigit() and 1 <= int(answer) <= len(GAME_NAMES):
            return GAME_NAMES[int(answer) - 1]
        for g in GAME_NAMES:
            if answer in (g, GAME_TITLES[g].lower(), GAME_TITLES[g].lower().replace("'", "")):
                return g
        typer.echo(f"Not a game here: {answer[:20]!r}.")


# What puts a player on a leaderboard (`court leaderboard` says it when the board is empty; the README too).
RANKED_RULE = (
    "A game counts only when it is online (`court quick GAME`, or `court lobby create GAME --online`, "
    "accounts only), ends, and has at least two people at the table: bots hold no rating and no rank "
    "points, so a game against bots alone rates nobody. Rank points and antes exist only in online "
    "Queen's Court."
)


@app.command()
def quick(
    game: str,
    ante: Annotated[int, typer.Option(help="online Queen's Court: rank points each player stakes")] = 0,
    option: Annotated[
        list[str] | None, typer.Option("--option", "-o", help="KEY=VALUE for a new lobby")
    ] = None,
    wait: Annotated[float, typer.Option(help="seconds to wait for people before bots fill the seats")] = 15.0,
    level: Annotated[str, typer.Option(help="bot level for the empty seats")] = "heuristic",
) -> None:
    """Quick match: join the best open online lobby (or open one), bots fill what people do not, play."""

    async def body(court: Court, out: Console, fancy: bool) -> None:
        options = parse_options(game, option)
        check_level(level)
        await court.require(account=True)
        lb = await court.call(court.lobby.quick_match, game, options, ante=ante)
        out.print(
            Text(
                f"Quick match: lobby {lb.lobby_id} ({GAME_TITLES[game]}, online, ante {lb.ante})",
                style="bold",
            )
        )
        lb = await wait_started(court, out, lb, wait, level)
        await sit_and_play(court, out, fancy, lb.game_id, level)

    run(body)


async def unfinished_online_game(court: Court, game: str = "") -> lpb.MyGame | None:
    """The signed-in person's most recent unfinished online game (of kind ``game`` if given): the
    one where the clock runs and other people wait for them. Local games are left to `court resume`."""
    if not court.signed_in:
        return None
    try:
        mine = await court.call(court.lobby.my_games)
    except CliError:  # a session that no longer signs in: `court play` goes on as a guest
        return None
    return next((g for g in mine.games if g.online and (not game or g.game == game)), None)


@app.command()
def play(
    game: Annotated[
        str, typer.Argument(help="queens_court, hearts, the_court or court_wars; left out: you are asked")
    ] = "",
    option: Annotated[
        list[str] | None, typer.Option("--option", "-o", help="KEY=VALUE, e.g. players=3")
    ] = None,
    level: Annotated[str, typer.Option(help="bot level: random, heuristic, expert")] = "heuristic",
    new: Annotated[
        bool,
        typer.Option("--new", help="start a new local game even if an online game of yours is unfinished"),
    ] = False,
) -> None:
    """A local game against bots (no rank points); signs you in as a guest if nobody is.

    If you have an unfinished online game (of GAME, when given), you go back to your seat in it
    instead (as `court resume` does: the clock stops playing for you), since other people wait
    there; `--new` starts a new local game all the same. Unfinished local games wait for `court resume`."""

    async def body(court: Court, out: Console, fancy: bool) -> None:
        from court_bots.levels import HEARTS_PERSON_NAME

        if not new and (mine := await unfinished_online_game(court, game)) is not None:
            out.print(
                Text(
                    f"You have an unfinished online game of {GAME_TITLES.get(mine.game, mine.game)} "
                    f"(game {mine.game_id}); taking your seat back. (`{court_command()} play --new` "
                    "starts a new local game.)",
                    style="bold",
                )
            )
            await resume_game(court, out, fancy, mine.game_id)
            return
        kind = game or choose_game()
        options = parse_options(kind, option)
        check_level(level)
        await court.ensure_guest(HEARTS_PERSON_NAME)
        lb = await court.call(court.lobby.create_lobby, kind, options, online=False, private=True)
        lb = await fill_and_start(court, out, lb, level)
        await sit_and_play(court, out, fancy, lb.game_id, level)

    run(body)


@app.command()
def games() -> None:
    """Your unfinished games (resume one with `court resume GAME_ID`)."""

    async def body(court: Court, out: Console, fancy: bool) -> None:
        await court.require()
        mine = await court.call(court.lobby.my_games)
        if not mine.games:
            c = court_command()
            out.print(f"No unfinished games. Start one with `{c} play hearts` or `{c} quick hearts`.")
            return
        t = RichTable(box=None, pad_edge=False)
        for col in ("game id", "game", "seat", "mode", "ante", "started"):
            t.add_column(col)
        for g in mine.games:
            t.add_row(
                g.game_id,
                GAME_TITLES.get(g.game, g.game),
                str(g.seat),
                "online" if g.online else "local",
                str(g.ante),
                g.started.ToDatetime().strftime("%Y-%m-%d %H:%M") if g.HasField("started") else "",
            )
        out.print(t)

    run(body)


@app.command()
def resume(
    game_id: Annotated[str, typer.Argument(help="empty: your most recent unfinished game")] = "",
    from_save_point: Annotated[
        bool,
        typer.Option(
            "--from-save-point",
            help="Hearts: start again from the last save point (the start of the current hand) "
            "at a new local table, bots for whoever is gone; the old game is abandoned",
        ),
    ] = False,
) -> None:
    """Sit down again at a saved (unfinished) game: where it stands, or from its last save point."""

    async def body(court: Court, out: Console, fancy: bool) -> None:
        await court.require()
        gid = game_id
        if not gid:
            mine = await court.call(court.lobby.my_games)
            if not mine.games:
                raise CliError("you have no unfinished game to resume")
            gid = mine.games[0].game_id
        else:
            await my_unfinished_game(court, gid, "to resume")
        await resume_game(court, out, fancy, gid, from_save_point=from_save_point)

    run(body)


async def my_unfinished_game(court: Court, game_id: str, purpose: str) -> lpb.MyGame:
    """The signed-in person's unfinished game ``game_id``, or ``CliError`` saying why there is none:
    no such game, a game that is over, or someone else's (``purpose``: "to resume", "to abandon")."""
    mine = await court.call(court.lobby.my_games)
    game = next((g for g in mine.games if g.game_id == game_id), None)
    if game is not None:
        return game
    try:
        view = await court.rules.get_view(game_id)
    except grpc.aio.AioRpcError as err:
        if err.code() in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT):
            raise CliError(f"game {game_id} does not exist (`{court_command()} games` lists yours)") from None
        from .session import explain

        raise CliError(explain(err, "rules", court.endpoints.rules)) from None
    why = "is over" if view.finished else "is not one of yours"
    raise CliError(f"game {game_id} {why}: nothing {purpose} (`{court_command()} games` lists yours)")


async def resume_game(
    court: Court, out: Console, fancy: bool, gid: str, *, from_save_point: bool = False
) -> None:
    """Sit down again at game ``gid`` (`court resume`, and `court play` with an unfinished online
    game): the table takes an away seat back (ReturnToSeat) before it shows the game."""
    if from_save_point:
        lb = await court.call(court.lobby.resume, gid)
        out.print(
            Text(
                f"Game {gid} resumes from its last save point as game {lb.game_id} (a new local table; "
                "the old game is abandoned).",
                style="bold",
            )
        )
        gid = lb.game_id
    else:
        out.print(Text(f"Resuming game {gid}.", style="bold"))
    await sit_and_play(court, out, fancy, gid)


@app.command()
def watch(
    game_id: str, pace: Annotated[float, typer.Option(help="seconds between drawn moves")] = 0.0
) -> None:
    """Watch a game as it is played (a spectator sees no hands)."""
    from .watch import Spectator

    async def body(court: Court, out: Console, fancy: bool) -> None:
        await court.ensure_guest("Spectator")
        await Spectator(out, fancy, pace=pace).run(court, game_id)

    run(body)


@app.command()
def abandon(game_id: str, yes: Annotated[bool, typer.Option("--yes", help="do not ask")] = False) -> None:
    """Give up one of your unfinished games: the bot plays your seat to the end, and the game is abandoned
    (every ante refunded) once every person at the table has asked (alone against bots: at once)."""

    async def body(court: Court, out: Console, fancy: bool) -> None:
        await court.require()
        game = await my_unfinished_game(court, game_id, "to abandon")
        what = (
            f"{GAME_TITLES.get(game.game, game.game)} game {game_id} ({'online' if game.online else 'local'}"
            + (f", ante {game.ante})" if game.ante else ")")
        )
        if not yes and not typer.confirm(
            f"Give up the {what}? (The bot plays your seat; the game is abandoned only when every "
            "person at the table asks.)"
        ):
            raise typer.Exit(1)
        answer = await court.call(court.lobby.abandon, game_id)
        out.print(abandon_words(answer, game_id), soft_wrap=True)

    run(body)


def abandon_words(lb: lpb.Lobby, game_id: str) -> str:
    """What the lobby's AbandonGame answer says happened: the game abandoned (every person at the table
    asked; antes refunded) or only the caller's seat marked away (the game goes on, played by the bot)."""
    if lb.state == lpb.LOBBY_STATE_ABANDONED:
        if lb.ante:
            return f"Game {game_id} abandoned; every ante ({lb.ante} rank points each) is refunded."
        if not lb.online:
            return f"Game {game_id} abandoned. (A local game: no rank points were at stake.)"
        return f"Game {game_id} abandoned."
    people = [s for s in lb.seats if s.player_id and not s.player_id.startswith("bot:")]
    asked = sum(1 for s in people if s.abandon_asked)
    level = lb.autoplay_level or "heuristic"
    stake = f"; nothing is refunded: your ante of {lb.ante} rank points stays in the game" if lb.ante else ""
    return (
        f"You gave up your seat in game {game_id}: it is marked away and the {level} bot plays it to "
        f"the end; the result stands and counts for your account{stake}. The game is abandoned "
        f"(every ante refunded) only when every person at the table asks: {asked} of {len(people)} "
        "have asked."
    )


# ---------------------------------------------------------------------------- ranking


@admin_app.command("audit")
def admin_audit(
    token: Annotated[
        str,
        typer.Option(
            envvar="COURT_ADMIN_TOKEN",
            show_default=False,
            help="an admin bearer token (make token ROLE=admin)",
        ),
    ] = "",
) -> None:
    """Check the rank-point ledger across the whole database; exits 1 if anything is wrong.

    Every account's balance is its starting grant plus its entries; at most one entry per game,
    player and kind; every ended or abandoned game's antes paid out or refunded, never both,
    never neither. Prints each violation, one a line.
    """

    async def body(court: Court, out: Console, fancy: bool) -> int:
        if not token:
            raise CliError(
                "the audit needs an admin token: --token or COURT_ADMIN_TOKEN "
                "(e.g. `make token SUB=ops ROLE=admin`)"
            )
        court.ranking.token = token
        try:  # not court.call: a refused admin token must not be swapped for the signed-in player's
            report = await court.ranking.audit()
        except grpc.aio.AioRpcError as err:
            from .session import explain

            if err.code() == grpc.StatusCode.UNAUTHENTICATED:
                raise CliError(
                    f"the stack does not accept this admin token: {err.details()} (its key or signature "
                    "is not one this stack knows; `make token` signs with the dev key of its "
                    "COURT_STATE_DIR, which must be the running stack's)"
                ) from None
            raise CliError(explain(err, "ranking", court.endpoints.ranking)) from None
        for v in report.violations:
            where = " ".join(
                x
                for x in (
                    f"game {v.game_id}" if v.game_id else "",
                    f"player {v.player_id}" if v.player_id else "",
                )
                if x
            )
            out.print(f"VIOLATION {v.kind}: {where}: {v.detail}", markup=False, highlight=False)
        out.print(
            f"audited {report.accounts} accounts, {report.games} ranked games, {report.entries} ledger entries "
            f"({report.total_points} points in all): {len(report.violations)} violation(s)",
            highlight=False,
        )
        return 1 if report.violations else 0

    code = run(body)
    if code:
        raise typer.Exit(code)


@app.command()
def rank(player: Annotated[str, typer.Argument(help="a player id (default: you)")] = "") -> None:
    """Rank points, ranked games and ratings."""

    async def body(court: Court, out: Console, fancy: bool) -> None:
        await court.require()
        prof = await court.call(court.ranking.profile, player)
        name = prof.name or (court.my_name if prof.player_id == court.me else prof.player_id)
        out.print(
            Text(f"{name}: {prof.points} rank points, {plural(prof.games, 'ranked game')}", style="bold")
        )
        for st in prof.stats:
            out.print(
                f"  {GAME_TITLES.get(st.game, st.game)}: rating {st.rating:.1f} over {plural(st.played, 'game')}"
            )

    run(body)


@app.command()
def ledger(limit: Annotated[int, typer.Option(help="entries to show")] = 20) -> None:
    """Your rank-point ledger, newest first."""

    async def body(court: Court, out: Console, fancy: bool) -> None:
        await court.require()
        hist = await court.call(court.ranking.ledger, page_size=limit)
        out.print(Text(f"Balance: {hist.balance} rank points", style="bold"))
        t = RichTable(box=None, pad_edge=False)
        for col in ("time", "change", "after", "reason", "game"):
            t.add_column(col)
        for e in hist.entries:
            t.add_row(
                e.time.ToDatetime().strftime("%Y-%m-%d %H:%M"),
                f"{e.delta:+d}",
                str(e.balance_after),
                e.note,
                e.game_id,
            )
        out.print(t)

    run(body)


@app.command()
def leaderboard(
    game: str,
    points: Annotated[bool, typer.Option(help="by net rank points, not rating")] = False,
    limit: Annotated[int, typer.Option(help="rows")] = 10,
) -> None:
    """The best players of a game."""

    async def body(court: Court, out: Console, fancy: bool) -> None:
        parse_options(game, None)
        await court.require()
        metric = rpb.METRIC_POINTS if points else rpb.METRIC_RATING
        board = await court.call(court.ranking.leaderboard, game, limit=limit, metric=metric)
        out.print(Text(f"{GAME_TITLES[game]} leaderboard ({'points' if points else 'rating'})", style="bold"))
        if not board.rows:
            out.print(f"Nobody is ranked in {GAME_TITLES[game]} yet. {RANKED_RULE}", soft_wrap=True)
        for r in board.rows:
            score = f"{r.points:+d} points" if points else f"rating {r.rating:.1f}"
            out.print(f"  {r.rank:>3}. {r.name or r.player_id:<24} {score}  ({plural(r.games, 'game')})")

    run(body)


@app.command()
def challenges(game_id: str) -> None:
    """Your challenges in an online Queen's Court game."""

    async def body(court: Court, out: Console, fancy: bool) -> None:
        await court.require()
        got = await court.call(court.ranking.challenges, game_id)
        for seat in got.seats:
            out.print(Text(f"Seat {seat.seat}:", style="bold"))
            for c in seat.challenges:
                mark = "✓" if c.complete and fancy else ("done" if c.complete else c.progress or "open")
                out.print(f"  [{c.tier:>3}] {c.text} — {mark}")
        if got.finished:
            out.print("The game is over: completed challenges have been paid.")

    run(body)


# ---------------------------------------------------------------------------- events


@events_app.command("tail")
def events_tail(
    game: Annotated[str, typer.Option(help="only this game (queens_court, hearts, ...)")] = "",
    game_id: Annotated[str, typer.Option("--game-id", help="only this game id")] = "",
    type_: Annotated[
        list[str] | None, typer.Option("--type", help="only these event types (repeatable)")
    ] = None,
    from_start: Annotated[bool, typer.Option("--from-start", help="replay the stored history first")] = False,
    count: Annotated[int, typer.Option(help="stop after this many events (0: never)")] = 0,
    idle_exit: Annotated[float, typer.Option(help="stop after this many quiet seconds (0: never)")] = 0.0,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object per event")] = False,
) -> None:
    """Follow the public event stream (JetStream COURT_EVENTS), filtered by game, id and type."""
    if game and game not in GAME_NAMES:
        _fail(f"unknown game {game!r}; games: {', '.join(GAME_NAMES)}")
    known = event_types(game)
    unknown = [t for t in type_ or () if t not in known]
    if unknown:
        _fail(
            f"unknown event type{'s' if len(unknown) > 1 else ''} {', '.join(repr(t[:40]) for t in unknown)}"
            + (f" in {GAME_TITLES[game]}" if game else "")
            + f"; the known types: {', '.join(known)}"
        )

    async def body(court: Court, out: Console, fancy: bool) -> None:
        from .events import tail
        from .session import nats_credentials

        user, password = nats_credentials()
        await tail(
            court.endpoints.nats_url,
            out,
            game=game,
            game_id=game_id,
            types=type_ or (),
            from_start=from_start,
            count=count,
            as_json=as_json,
            idle_exit=idle_exit,
            user=user,
            password=password,
        )

    run(body)


# ---------------------------------------------------------------------------- the API, by reflection


@api_app.command("list")
def api_list(
    service: Annotated[
        str,
        typer.Argument(
            help="rules, lobby, ranking, bot, HOST:PORT or a full service name; empty: every service"
        ),
    ] = "",
) -> None:
    """The services each address serves, or one service's methods with their request and response types."""
    from .api import list_lines
    from .session import CliError, Endpoints

    out, _ = console()
    try:
        for line in list_lines(Endpoints.from_env(), service):
            out.print(line, markup=False, soft_wrap=True)
    except CliError as exc:
        _fail(str(exc))


@api_app.command("call")
def api_call(
    service: Annotated[
        str, typer.Argument(help="rules, lobby, ranking, bot, HOST:PORT or a full service name")
    ],
    method: Annotated[str, typer.Argument(help="a method name (GetView) or Service/Method")],
    request: Annotated[
        str, typer.Argument(help="the request as JSON (protobuf's JSON mapping); default {}")
    ] = "{}",
    token: Annotated[
        str,
        typer.Option(
            help="bearer token (default: $COURT_TOKEN, else the signed-in session's)",
            envvar="COURT_TOKEN",
            show_envvar=False,
        ),
    ] = "",
    timeout: Annotated[float, typer.Option(help="seconds (0: none, for streams)")] = 30.0,
    count: Annotated[int, typer.Option(help="a stream: stop after this many messages (0: never)")] = 0,
) -> None:
    """Call a method with a JSON request, sending `authorization: Bearer TOKEN`; print each answer as JSON."""
    import json

    from .api import call
    from .session import CliError, Endpoints, SessionStore, config_dir

    out, _ = console()
    endpoints = Endpoints.from_env()
    if not token:
        session = SessionStore(config_dir() / "session.json").load(endpoints.lobby) or {}
        token = session.get("token", "")
    try:
        for answer in call(endpoints, service, method, request, token, timeout=timeout, count=count):
            out.print(json.dumps(answer, indent=2, sort_keys=True), markup=False, soft_wrap=True)
    except CliError as exc:
        _fail(str(exc))


def _fail(message: str) -> None:
    out, _ = console()
    out.print(Text(f"court: {message}", style="bold red"), soft_wrap=True)
    raise typer.Exit(1)


# ---------------------------------------------------------------------------- the stack


def shown_path(path: Path) -> str:
    """A path as a person would type it from here: relative below the working directory, else absolute."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path.resolve())


def web_url(config: StackConfig) -> str:
    return f"http://{config.address('web')}/"


def stack_rows(rows: Sequence[Sequence[str]]) -> list[str]:
    """The banner's and `court stack status`'s rows: every column as wide as its widest cell (a service
    name, an address), so that rows line up whatever services the stack runs."""
    widths = [max(len(r[i]) for r in rows if i < len(r) - 1) for i in range(max(len(r) for r in rows) - 1)]
    return ["  " + " ".join([*(c.ljust(widths[i]) for i, c in enumerate(r[:-1])), r[-1]]) for r in rows]


def _make_state(rel: str) -> str:
    """`` COURT_STATE_DIR=…`` for a make command when the stack's state is not the default ``.state``."""
    import shlex

    return "" if rel == ".state" else f" COURT_STATE_DIR={shlex.quote(rel)}"


def _banner(out: Console, config: StackConfig) -> None:
    from .stack import SERVICES

    rel = shown_path(config.state_dir)
    out.print(Text(f"Court is running (state in {rel}/, logs in {rel}/logs/):", style="bold green"))
    rows = [(name, web_url(config) if name == "web" else config.address(name)) for name in SERVICES]
    rows.append(("nats", f"{config.nats_url} (JetStream, store {rel}/nats)"))
    for line in stack_rows(rows):
        out.print(line)
    out.print(Text(f"Play in your browser: open {web_url(config)}", style="bold"))
    hint_env = _make_state(rel).lstrip() + " " if rel != ".state" else ""
    c = court_command()
    out.print(
        Text(
            f"Sit down and play, in another terminal: make play{_make_state(rel)}   (or {hint_env}{c} play "
            "hearts | queens_court | the_court | court_wars)",
            style="bold",
        )
    )
    if rel != ".state":
        out.print(f"A token for this stack: make token{_make_state(rel)} SUB=alice ROLE=player")
    out.print(f"More: {hint_env}{c} --help · watch the event stream: {hint_env}{c} events tail")
    out.print("Ctrl-C stops everything.")


async def _up(
    stack: LocalStack, out: Console, fancy: bool, *, demo: bool, demo_games: int, pace: float, level: str
) -> int:
    from court_kit.loops import rest

    from .demo import run_demo

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, stop.set)
    status = 0
    died: list[str] = []

    async def monitor() -> None:
        while not stop.is_set():
            dead = stack.dead()
            if dead:
                for c in dead:
                    died.append(c.name)
                    out.print(
                        Text(
                            f"{c.name} exited unexpectedly ({c.proc.returncode}); its log {c.log_path}:\n"
                            f"{c.log_tail()}",
                            style="bold red",
                        )
                    )
                stop.set()
                return
            await rest(stop, 0.5)

    async def show() -> None:
        if not demo:
            return
        from .session import SERVICES as CLIENT_SERVICES  # the four a client calls (not court-analytics)

        endpoints = Endpoints(
            **{s: stack.config.address(s) for s in CLIENT_SERVICES},
            nats_url=stack.config.nats_url,
            source="stack",
        )
        footer = (
            "Ctrl-C stops the stack · sit down and play: "
            f"make play{_make_state(shown_path(stack.config.state_dir))} (in another terminal)"
        )
        try:
            await run_demo(
                endpoints,
                stack.state_dir,
                out,
                fancy,
                pace=pace,
                games=demo_games,
                level=level,
                footer=footer,
            )
            out.print("The demo is over; the stack keeps running until Ctrl-C.")
        except CliError as exc:
            out.print(Text(f"demo stopped: {exc}; the stack keeps running until Ctrl-C", style="red"))

    tasks = [asyncio.create_task(monitor()), asyncio.create_task(show())]
    await stop.wait()
    for t in tasks:
        t.cancel()
    for t in tasks:
        with contextlib.suppress(asyncio.CancelledError):
            await t
    if died:
        status = 1
    return status


@stack_app.command("up")
def stack_up(
    free_ports: Annotated[bool, typer.Option("--free-ports", help="pick unused ports (tests)")] = False,
    state_dir: Annotated[Path | None, typer.Option(help="default $COURT_STATE_DIR or .state")] = None,
    demo: Annotated[bool, typer.Option(help="show a bot game being played")] = True,
    demo_games: Annotated[
        int, typer.Option(help="demo games to play (0: one after another until Ctrl-C)")
    ] = 0,
    pace: Annotated[float | None, typer.Option(help="seconds between drawn demo moves")] = None,
    level: Annotated[str, typer.Option(help="bot level of the demo")] = "heuristic",
) -> None:
    """Start NATS and every Court service, wait until healthy, show a bot game; Ctrl-C stops it all."""
    out, fancy = console()
    from .stack import LocalStack, StackConfig, StackError

    check = _check_level_or_exit(level)
    config = StackConfig.from_env(free_ports=free_ports, state_dir=state_dir)
    stack = LocalStack(config, progress=lambda msg: out.print(Text(f"  {msg}", style="dim")))

    def terminate(_sig: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    # SIGTERM, and Ctrl-C even when started with SIGINT ignored (a non-interactive shell's background
    # job, as CI runs the tests): both stop the stack from the first line on. A SIGINT ignored until
    # _up's own handler was in place used to be lost, and the launcher ran on
    previous = signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from .stack import SERVICES

    status = 0
    try:
        out.print(
            Text(
                f"Starting Court: nats-server and the {', '.join(SERVICES[:-1])} and {SERVICES[-1]} services "
                f"(state in {shown_path(config.state_dir)}/)…",
                style="bold",
            )
        )
        stack.start()
    except StackError as exc:
        out.print(Text(f"court stack: {exc}", style="bold red"))
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        out.print("interrupted; everything stopped")
        raise typer.Exit(130) from None
    try:
        _banner(out, config)
        status = asyncio.run(
            _up(
                stack,
                out,
                fancy,
                demo=demo,
                demo_games=demo_games,
                pace=(0.35 if fancy else 0.05) if pace is None else pace,
                level=check,
            )
        )
    except KeyboardInterrupt:
        pass
    finally:
        # a second Ctrl-C (or a SIGTERM) must not cut the shutdown short
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        _say_while_stopping(out, Text("Stopping…", style="bold"))
        codes = stack.stop()
        _say_while_stopping(
            out,
            Text("Stopped: " + ", ".join(f"{name} ({code})" for name, code in codes.items()), style="bold"),
        )
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, previous)
    raise typer.Exit(status)


def _say_while_stopping(out: Console, text: Text) -> None:
    """Print ``text`` if anyone still reads the output. ``make run | tee log`` and Ctrl-C: the same
    SIGINT ends tee, and rich answers the broken pipe with SystemExit (having pointed stdout at
    /dev/null); raised here it would end the launcher before the stack is stopped, and every
    child would get its death signal at once, nats-server with the services."""
    with contextlib.suppress(SystemExit, OSError):
        out.print(text)


def _check_level_or_exit(level: str) -> str:
    if level not in LEVELS:
        _fail(f"unknown bot level {level!r}; levels: {', '.join(LEVELS)}")
    return level


@stack_app.command("status")
def stack_status() -> None:
    """Is a local stack running, where, and is every service healthy?"""
    out, _ = console()
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from .stack import HTTP_SERVICES, LocalStack, StackConfig, http_health

    config = StackConfig.from_env()
    info = LocalStack.read_stack_file(config.state_dir)
    if not info:
        out.print(f"No stack is running on {config.state_dir} (start one with `make run`).")
        raise typer.Exit(1)
    bad = 0
    rows: list[tuple[str, str, str, str]] = []
    for name, svc in info["services"].items():
        if name in HTTP_SERVICES:  # court-web: its readiness over HTTP, and the URL to open
            code, word = http_health(svc["address"], "/readyz")
            bad += code != 200
            rows.append((name, svc["address"], f"pid {svc['pid']}", f"{word}  http://{svc['address']}/"))
            continue
        with grpc.insecure_channel(svc["address"]) as ch:
            try:
                st = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=2).status
                word = health_pb2.HealthCheckResponse.ServingStatus.Name(st)
            except grpc.RpcError as err:
                word, st = err.code().name, -1
        bad += st != health_pb2.HealthCheckResponse.SERVING
        rows.append((name, svc["address"], f"pid {svc['pid']}", word))
    rows.append(("nats", info["nats_url"], f"pid {info['nats_pid']}", ""))
    for line in stack_rows(rows):
        out.print(line.rstrip())
    raise typer.Exit(1 if bad else 0)


# commands that live in their own modules (kept out of this file to keep it short)
from . import simulate as _simulate  # noqa: E402
from .analytics import analytics_app  # noqa: E402

app.command("simulate")(_simulate.command)
app.add_typer(analytics_app, name="analytics")


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
