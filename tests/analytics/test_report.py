"""``court analytics report`` over a lake written by court_analytics.Lake: the page's figures are
the documented queries' answers, and the page loads nothing from anywhere."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

from court_analytics.lake import Lake
from court_cli.analytics import QUERIES, run_queries, wilson

from .conftest import COURT
from .test_lake import game_records


def make_lake(root: Path, moves: dict[str, int]) -> Lake:
    lake = Lake(root)
    for g, n in moves.items():
        lake.stage_batch([(body, headers) for _, body, headers in game_records(g, n)])
        assert lake.try_finish(g)
    return lake


def test_report_figures_are_the_queries_answers(tmp_path: Path) -> None:
    moves = {f"g{i:04d}": 3 + i for i in range(9)}  # the winner of a game of n moves is seat n % 3
    make_lake(tmp_path / "lake", moves)
    data = run_queries(tmp_path / "lake")
    assert data["length"] == [{"game": "hearts", "games": 9, "min": 3, "median": 7, "p90": 11, "max": 11}]
    wins = {r["seat"]: r["wins"] for r in data["win_by_seat"]}
    assert wins == {s: sum(1 for n in moves.values() if n % 3 == s) for s in range(3)}
    assert sum(r["games"] for r in data["games_per_hour"]) == 9
    assert wilson(0, 0) == (0.0, 0.0) and wilson(5, 10)[0] < 0.5 < wilson(5, 10)[1]
    out = tmp_path / "report.html"
    run = subprocess.run(
        [COURT, "analytics", "report", "--lake", str(tmp_path / "lake"), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "(9 games)" in run.stdout
    page = out.read_text()
    for name, (_title, sql) in QUERIES.items():
        assert f'id="{name}"' in page and sql.strip().split("\n")[0][:30] in page.replace("&#x27;", "'")
    assert not re.search(r"""(src|href)\s*=\s*["']?https?:""", page)  # self-contained: nothing to fetch
    assert "<script" not in page  # a static page: no script at all
    assert "<svg" in page


def test_report_since_and_a_missing_lake(tmp_path: Path) -> None:
    make_lake(tmp_path / "lake", {"g0001": 4})
    assert run_queries(tmp_path / "lake")["length"][0]["games"] == 1
    from datetime import UTC, datetime

    assert run_queries(tmp_path / "lake", datetime(2100, 1, 1, tzinfo=UTC))["length"] == []
    run = subprocess.run(
        [
            COURT,
            "analytics",
            "report",
            "--lake",
            str(tmp_path / "nowhere"),
            "--out",
            str(tmp_path / "r.html"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 1 and "no games table" in run.stdout
    run = subprocess.run(
        [COURT, "analytics", "report", "--lake", str(tmp_path / "lake"), "--since", "yesterday"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2 and "ISO date" in run.stdout + run.stderr


def test_docs_show_the_reports_queries() -> None:
    from court_cli.analytics import docs_markdown

    doc = Path(__file__).parents[2] / "docs" / "analytics.md"
    assert doc.read_text() == docs_markdown(), "regenerate it with court_cli.analytics.docs_markdown()"


def test_no_court_target_is_written_into_the_reports_text() -> None:
    """The Court's targets come from each game's result (the rules per mode), so no title, query or
    page of docs/analytics.md carries a number of its own that could drift from the engine's."""
    from court_cli.analytics import DOC_HEAD, QUERIES
    from court_games.the_court.engine import TARGETS

    texts = [DOC_HEAD, *(t for t, _ in QUERIES.values())]
    for target in {t for t in TARGETS.values() if t is not None}:
        assert not any(re.search(rf"\b{target}\b", x) for x in texts), target


_QC_REAL: dict[int, dict[str, Any]] = {}


def _qc_real_events(n: int) -> dict[str, Any]:
    """One real n-seat Queen's Court game's events of each kind (schema-true payloads)."""
    if n not in _QC_REAL:
        import random

        from court_games.registry import get_game
        from court_rules.games import start_game

        module = get_game("queens_court")
        state, opening = start_game(module, module.options_from_dict({"players": n}), 5)
        found: dict[str, Any] = {e.type: e for e in opening}
        rng = random.Random(5)
        while not module.is_terminal(state):
            seat = module.to_act(state)[0]
            state, evs = module.apply(state, seat, rng.choice(module.legal_actions(state, seat)))
            found.update({e.type: e for e in evs if e.type not in found})
        _QC_REAL[n] = found
    return _QC_REAL[n]


def qc_game(
    game_id: str, seats: list[str], rounds: list[tuple[int, list[int]]], online: bool = True
) -> list[tuple[bytes, dict]]:
    """A Queen's Court game's public records (court.events.v2) as the lake stages them: the
    creation (``online``: started by the lobby as an online game), one move per (starter, winners)
    whose events are a RoundEnded, then a move with the GameEnded (real payloads; their other keys
    do not matter to the view)."""
    from court_contract import records as krec
    from court_games.core import Event
    from court_proto.court.rules.v1 import actions_pb2

    real = _qc_real_events(len(seats))
    t0 = 1_790_000_000
    out = []

    def add(rec: Any) -> None:
        out.append(
            (
                krec.redact(rec).SerializeToString(),
                {"Nats-Msg-Id": krec.msg_id(game_id, rec.seq), "Court-Seq": str(rec.seq)},
            )
        )

    def move(seq: int, event: Event, finished: bool) -> Any:
        return krec.move_record(
            "queens_court",
            game_id,
            seq,
            (t0 + seq) * 1000,
            seat=0,
            action=actions_pb2.Action(),
            action_type="play",
            by="x",
            request_id=f"m{seq}",
            events=[event],
            to_act=[] if finished else [0],
            seats=seats,
            finished=finished,
        )

    add(
        krec.created_record(
            "queens_court",
            game_id,
            t0 * 1000,
            seats=seats,
            options={"players": len(seats)},
            seed=1,
            by="lobby",
            request_id="r",
            events=[real["GameStarted"]],
            to_act=[0],
            finished=False,
            online=online,
        )
    )
    for i, (starter, winners) in enumerate(rounds, start=1):
        add(
            move(
                i,
                Event(
                    "RoundEnded",
                    {**real["RoundEnded"].data, "round": i, "starter": starter, "winners": winners},
                ),
                False,
            )
        )
    add(move(len(rounds) + 1, real["GameEnded"], True))
    return out


def test_the_round_points_view_is_the_ranking_services_arithmetic(tmp_path: Path) -> None:
    """qc_round_points (SQL over the public records) against court_ranking.settle.round_points (what
    the ranking service writes to the ledger), on random tables of people and bots: ties, rounds
    nobody won, rounds only bots won, remainders. Every fifth game is local play (its creation not
    online): it moves no points, and the report counts none of its rounds."""
    import random
    from collections import Counter

    from court_ranking.settle import GameInfo, round_points

    rng = random.Random(17)
    lake = Lake(tmp_path / "lake")
    want: Counter[tuple[str, str]] = Counter()
    local: set[str] = set()
    for g in range(60):
        n = rng.randint(2, 4)  # Queen's Court seats two to four
        seats = ["bot:random" if rng.random() < 0.4 else f"p{g}x{s}" for s in range(n)]
        if all(s.startswith("bot:") for s in seats):
            seats[0] = f"p{g}x0"
        rounds = [
            (rng.randrange(n), sorted(rng.sample(range(n), rng.choice([0, 1, 1, 2, 3][:n]))))
            for _ in range(rng.randint(1, 6))
        ]
        if g < 4:  # four people, three of them winning: 100 does not split in three (the remainder rule)
            seats, n = [f"p{g}x{s}" for s in range(4)], 4
            rounds = [(g, [s for s in range(4) if s != (g + 1) % 4]), (3 - g, [0, 1, 2]), (g, [1, 2, 3])]
        game_id = f"q{g:03d}"
        online = g % 5 != 4
        lake.stage_batch(qc_game(game_id, seats, rounds, online))
        assert lake.try_finish(game_id)
        if not online:
            local.add(game_id)
            continue
        info = GameInfo(game_id, "queens_court", True, 0, 0, tuple(seats), {})
        for starter, winners in rounds:
            for seat, d in round_points(
                info, {"type": "RoundEnded", "starter": starter, "winners": winners}
            ).items():
                if not seats[seat].startswith("bot:"):
                    want[(game_id, seats[seat])] += d
    data = run_queries(tmp_path / "lake")
    got = {(r["game_id"], r["player_id"]): r["points"] for r in data["qc_rank_points"]}
    assert got == {k: want[k] for k in got} and set(want) <= set(got)
    assert len(local) == 12 and not {g for g, _ in got} & local  # local play: no points counted
    by_player = {r["player_id"]: r["points"] for r in data["qc_rank_points_by_player"]}
    assert sum(by_player.values()) == sum(want.values())
    assert any(v < 0 for v in want.values()) and any(v > 0 for v in want.values())


def test_names_when_the_lobby_is_down_slow_or_nobody_is_signed_in(tmp_path: Path) -> None:
    """The lobby is another process: down (nothing listens), slow (it accepts and never answers) or
    nobody is signed in: the report is written all the same, with player ids, and says why under
    its heading and on the terminal."""
    import asyncio
    import socket

    from court_cli.analytics import lookup_names

    ids = ["p-ann", "p-bob"]
    down = socket.socket()
    down.bind(("127.0.0.1", 0))
    dead = f"127.0.0.1:{down.getsockname()[1]}"
    down.close()  # nothing listens there now
    names, note = asyncio.run(lookup_names(ids, dead, "token", timeout=3.0))
    assert names == {} and dead in note and "player ids are shown" in note

    slow = socket.socket()
    slow.bind(("127.0.0.1", 0))
    slow.listen()  # accepts connections (the kernel does) and never answers a byte
    try:
        addr = f"127.0.0.1:{slow.getsockname()[1]}"
        names, note = asyncio.run(lookup_names(ids, addr, "token", timeout=1.0))
        assert names == {} and "did not answer within 1 s" in note and "player ids are shown" in note
    finally:
        slow.close()

    # the command: an online Queen's Court game in the lake, so there are people to name
    lake = Lake(tmp_path / "lake")
    lake.stage_batch(qc_game("q001", ["p-ann", "p-bob", "bot:random"], [(0, [0])]))
    assert lake.try_finish("q001")
    out = tmp_path / "r.html"

    def report(config: Path) -> str:
        run = subprocess.run(
            [COURT, "analytics", "report", "--lake", str(tmp_path / "lake"), "--out", str(out)],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "COURT_CONFIG_DIR": str(config), "COURT_LOBBY_ADDR": dead},
        )
        assert run.returncode == 0, run.stdout + run.stderr
        assert "(1 games)." in run.stdout
        page = out.read_text()
        assert 'data-label="p-ann"' in page and "<td>p-ann</td>" in page  # ids, as nothing named them
        return " ".join(run.stdout.split())

    said = report(tmp_path / "nobody")
    assert f"nobody is signed in at the lobby {dead}" in said and "login NAME" in said
    assert "nobody is signed in" in out.read_text()
    from court_cli.session import SessionStore

    SessionStore(tmp_path / "ann" / "session.json").save(
        dead, {"token": "t", "player_id": "p-ann", "name": "Ann"}
    )
    said = report(tmp_path / "ann")
    assert f"the lobby at {dead} answered UNAVAILABLE" in said and "player ids are shown" in said
