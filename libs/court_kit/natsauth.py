"""NATS identities and their permissions: the one table, and the nats-server configuration it makes.

Each service connects as its own NATS user (``COURT_NATS_USER`` / ``COURT_NATS_PASSWORD``, from a
Secret in Kubernetes, generated under ``<state>/keys/`` by ``make run``); anonymous connections are
refused, and players never connect to NATS. Every identity has its own inbox prefix
(``_INBOX_<user>``), so no identity can subscribe to another's replies.

=========  ===============================================================================
identity   may
=========  ===============================================================================
rules      append to the game logs (``court.games.>``, the full records: the move's one
           write); as the in-process projector (``COURT_PROJECTOR=on``) publish public records
           (``court.events.>``) and archive finished games; create, update and read streams
           (purge only for the janitor, never delete); direct-get; the durables
           ``court-projector`` (any stream), ``rules-clock`` (the turn clock, on every
           COURT_GAMES_<shard>) and ``rules-janitor``; subscribe to ``court.games.>``
           (WatchGame wake-ups); publish bot seats' views (``court.botviews.>``)
projector  the ``court-projector`` process: read the game logs through its durable
           ``court-projector``, direct-get, publish public records (``court.events.>``) and the
           archive (``court.archive.>``); create/update streams; never the game logs' subjects
ranking    consume the public records only: its durable ``ranking`` on COURT_EVENTS, direct-get
           and stream info of COURT_EVENTS
bot        read only the public records: its durable ``court-bot`` on COURT_EVENTS, stream info
           of COURT_EVENTS; no direct get, nothing full-information; subscribe to the bot
           seats' views the rules service pushes (``court.botviews.>``: views the bot identity
           may read with GetView anyway)
analytics  consume only: its durable ``analytics`` and ephemeral (ordered) push consumers on
           any stream (the public records and the full game logs), direct-get, stream info
           (``court events`` uses it in dev)
=========  ===============================================================================

No identity but rules may publish on ``court.games.>`` and only rules and projector on
``court.events.>``, so nobody else can append a fake ``GameEnded`` that ranking would pay out.
Players never connect to NATS; what they read comes through the rules service's gRPC (views,
WatchGame), never a game log. Who may read what: docs/contract.md. JetStream API subjects are listed one by one: the consumer ones carry
the stream and consumer names (``$JS.API.CONSUMER.<op>.<stream>.<consumer>``), so an identity can
only create, read or pull its own durable, and never delete, purge or take over another's.

Events v2: game logs on ``court.games.<shard>.<game_id>.{log,due}`` (streams ``COURT_GAMES_<shard>``),
public records on ``court.events.<game>.<game_id>`` (stream ``COURT_EVENTS``).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

GAME_LOG_SUBJECTS = ("court.games.>",)
PUBLIC_SUBJECTS = ("court.events.>",)
BOT_VIEWS_SUBJECTS = ("court.botviews.>",)  # court_contract.records.bot_views_subject
PUBLIC_STREAM = "COURT_EVENTS"
ARCHIVE_SUBJECTS = ("court.archive.>",)  # finished games' logs (court_rules.archive)
INFO = ("$JS.API.INFO",)


def inbox(user: str) -> str:
    return f"_INBOX_{user}"


def _consumer(stream: str, durable: str) -> list[str]:
    """The JetStream API subjects one durable pull consumer needs (create/update, info, pull, ack)."""
    return [
        f"$JS.API.CONSUMER.CREATE.{stream}.{durable}",
        f"$JS.API.CONSUMER.CREATE.{stream}.{durable}.>",
        f"$JS.API.CONSUMER.DURABLE.CREATE.{stream}.{durable}",
        f"$JS.API.CONSUMER.INFO.{stream}.{durable}",
        f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}",
        f"$JS.ACK.{stream}.{durable}.>",
    ]


@dataclass(frozen=True)
class Permissions:
    publish: tuple[str, ...]
    subscribe: tuple[str, ...]


def _perm(user: str, publish: Sequence[str], subscribe: Sequence[str] = ()) -> Permissions:
    return Permissions(tuple(publish), (f"{inbox(user)}.>", *subscribe))


PERMISSIONS: Mapping[str, Permissions] = {
    "rules": _perm(
        "rules",
        [
            *GAME_LOG_SUBJECTS,
            *PUBLIC_SUBJECTS,
            *INFO,
            "$JS.API.STREAM.CREATE.*",
            "$JS.API.STREAM.UPDATE.*",
            "$JS.API.STREAM.INFO.*",
            "$JS.API.STREAM.NAMES",
            "$JS.API.DIRECT.GET.*",
            "$JS.API.DIRECT.GET.*.>",
            *_consumer("*", "court-projector"),
            *_consumer(
                "*", "rules-clock"
            ),  # the turn clock's due records on every shard (court_rules.clockdriver)
            # finished games: written once to the archive, and the janitor purges them from the hot streams
            *ARCHIVE_SUBJECTS,
            "$JS.API.STREAM.PURGE.*",
            *_consumer("COURT_GAMES_ARCHIVE", "rules-janitor"),
            *BOT_VIEWS_SUBJECTS,  # bot seats' views after a person's move (court_rules.botviews)
        ],
        subscribe=GAME_LOG_SUBJECTS,
    ),
    "projector": _perm(
        "projector",
        [
            *PUBLIC_SUBJECTS,
            *ARCHIVE_SUBJECTS,
            *INFO,
            "$JS.API.STREAM.CREATE.*",
            "$JS.API.STREAM.UPDATE.*",
            "$JS.API.STREAM.INFO.*",
            "$JS.API.STREAM.NAMES",
            "$JS.API.DIRECT.GET.*",
            "$JS.API.DIRECT.GET.*.>",
            *_consumer("*", "court-projector"),
        ],
    ),
    "ranking": _perm(
        "ranking",
        [
            *INFO,
            f"$JS.API.STREAM.INFO.{PUBLIC_STREAM}",
            "$JS.API.STREAM.NAMES",
            f"$JS.API.DIRECT.GET.{PUBLIC_STREAM}",
            f"$JS.API.DIRECT.GET.{PUBLIC_STREAM}.>",
            *_consumer(PUBLIC_STREAM, "ranking"),
        ],
    ),
    "bot": _perm(
        "bot",
        [
            *INFO,
            f"$JS.API.STREAM.INFO.{PUBLIC_STREAM}",
            *_consumer(PUBLIC_STREAM, "court-bot"),
        ],
        subscribe=BOT_VIEWS_SUBJECTS,
    ),
    "analytics": _perm(
        "analytics",
        [
            *INFO,
            "$JS.API.STREAM.INFO.*",
            "$JS.API.STREAM.NAMES",
            "$JS.API.DIRECT.GET.*",
            "$JS.API.DIRECT.GET.*.>",
            "$JS.API.CONSUMER.CREATE.*",  # ephemeral consumers only (the server refuses a durable name here)
            "$JS.FC.>",  # flow-control replies of ordered push consumers
            *_consumer("*", "analytics"),
        ],
    ),
}
IDENTITIES = tuple(PERMISSIONS)
SERVICE_USERS = {
    "rules": "rules",
    "ranking": "ranking",
    "bot": "bot",
    "projector": "projector",
}  # the lobby does not use NATS


def _q(s: str) -> str:
    return json.dumps(s)


def password_env(user: str) -> str:
    """The environment variable nats-server reads ``user``'s password from (deploy/, compose)."""
    return f"NATS_{user.upper()}_PASSWORD"


BEGIN, END = "# BEGIN court_kit.natsauth", "# END court_kit.natsauth"


def authorization_block(passwords: Mapping[str, str] | None = None) -> str:
    """The nats-server ``authorization`` block: one user per identity with its permissions. With
    users defined and no ``no_auth_user``, anonymous connections are refused. Without
    ``passwords`` each password is a reference to the environment (``$NATS_RULES_PASSWORD``, ...),
    which nats-server resolves at start: what deploy/ and docker-compose.yml use, the Secret
    providing the values."""
    lines = [
        BEGIN + " (generated from its PERMISSIONS table; tests check it is in step)",
        "authorization {",
        "  users = [",
    ]
    for user, perm in PERMISSIONS.items():
        if passwords is not None and user not in passwords:
            continue
        pw = _q(passwords[user]) if passwords is not None else f"${password_env(user)}"
        lines += [
            f"    {{user: {_q(user)}, password: {pw}, permissions: {{",
            f"      publish: {{allow: [{', '.join(_q(s) for s in perm.publish)}]}}",
            f"      subscribe: {{allow: [{', '.join(_q(s) for s in perm.subscribe)}]}}",
            "    }}",
        ]
    lines += ["  ]", "}", END]
    return "\n".join(lines) + "\n"


def generate_passwords() -> dict[str, str]:
    return {user: secrets.token_urlsafe(24) for user in IDENTITIES}


def ensure_dev_users(state_dir: Path | str) -> dict[str, str]:
    """Random passwords per identity, generated once under ``<state>/keys/nats-users.json`` (0600)."""
    path = Path(state_dir) / "keys" / "nats-users.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        users = json.loads(path.read_text())
        if isinstance(users, dict) and set(IDENTITIES) <= set(users):
            return {k: str(v) for k, v in users.items()}
    except (OSError, ValueError):
        pass
    users = generate_passwords()
    tmp = path.with_name(path.name + ".tmp")
    import os  # noqa: PLC0415

    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(users, f)
    os.replace(tmp, path)
    return users


def main(argv: list[str] | None = None) -> int:
    """``python -m court_kit.natsauth [user=password ...]``: print the authorization block (random
    passwords for identities not given); ``--env``: with passwords from the environment, as in
    deploy/base/nats/nats.conf and deploy/compose/nats.conf."""
    import sys  # noqa: PLC0415

    args = argv if argv is not None else sys.argv[1:]
    if args == ["--env"]:
        sys.stdout.write(authorization_block())
        return 0
    given = dict(a.split("=", 1) for a in args)
    passwords = {**generate_passwords(), **given}
    sys.stdout.write(authorization_block(passwords))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
