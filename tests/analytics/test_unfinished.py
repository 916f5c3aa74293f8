"""Games that never end do not stay in staging for ever: once a game's staging has been quiet for
the retention (or, for a game another game resumed, for COURT_ANALYTICS_RESUMED_AFTER), its
complete moves land with a status, what cannot land is dropped and counted, and later records of
it are dropped and counted. The lake is real (Parquet files, read back with DuckDB);
tests/analytics/test_lake.py has the same through the court-analytics process."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from court_analytics import lake as lake_mod
from court_analytics.lake import Lake
from court_cli.analytics import run_queries
from court_contract import records as krec

from .test_lake import game_records, read

DAY = 86_400.0


def staged(lake: Lake, messages: list[tuple[str, bytes, dict[str, str]]]) -> None:
    lake.stage_batch([(body, headers) for _, body, headers in messages])


def upto(
    messages: list[tuple[str, bytes, dict[str, str]]], seq: int
) -> list[tuple[str, bytes, dict[str, str]]]:
    return [m for m in messages if int(m[2]["Court-Seq"]) <= seq]


def resumed_creation(game_id: str, old: str) -> tuple[str, bytes, dict[str, str]]:
    """The public creation record (court.events.v2) of ``game_id``, resuming ``old``."""
    rec = krec.created_record(
        "hearts",
        game_id,
        1_790_000_000 * 1000,
        seats=["pa", "bot:random"],
        options={},
        seed=1,
        by="lobby",
        request_id="r",
        events=[],
        to_act=[0],
        finished=False,
        resumed_from=old,
    )
    return (
        krec.public_subject("hearts", game_id),
        krec.redact(rec).SerializeToString(),
        {"Nats-Msg-Id": krec.msg_id(game_id, 0), "Court-Seq": "0"},
    )


def counter(metric, *labels: str) -> float:
    return (metric.labels(*labels) if labels else metric)._value.get()


def test_quiet_games_land_with_a_status_after_the_retention(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake")
    abandoned = game_records("g0001", 12)
    staged(lake, upto(abandoned, 7))  # stopped after move 7: abandoned
    gappy = game_records("g0002", 12)
    staged(lake, [m for m in upto(gappy, 9) if m[2]["Court-Seq"] != "4"])  # move 4 never arrived
    orphan = game_records("g0003", 6)
    staged(lake, [m for m in orphan if m[2]["Court-Seq"] != "0"])  # its creation never arrived
    old = game_records("g0004", 12)
    staged(lake, upto(old, 5))  # resumed as g0005 after move 5
    staged(lake, [resumed_creation("g0005", "g0004")])
    finished = game_records("g0006", 4)
    staged(lake, finished)  # complete: lands as finished, not closed out
    now = datetime.now(UTC)

    # within the retention nothing is closed (the resumed one waits only resumed_after)
    assert lake.close_out(retention=DAY, resumed_after=DAY, now=now + timedelta(seconds=DAY / 2)) == {}
    # the sweep reads only games whose GameEnded is staged
    assert lake.pending_ended() == ["g0003", "g0006"] and len(lake.staging_index()) == 6  # g0003: no creation
    assert lake.try_finish("g0006") == "wrote" and lake.done_info("g0006")["status"] == "finished"
    assert not any(lake.done(g) for g in ("g0001", "g0002", "g0003", "g0004"))
    assert lake.close_out(retention=DAY, resumed_after=60, now=now + timedelta(seconds=120)) == {"resumed": 1}
    assert lake.done("g0004") and not lake.done("g0001")
    assert lake.close_out(retention=0, resumed_after=0, now=now + timedelta(days=365)) == {}  # 0: never

    dropped_gap = counter(lake_mod.DROPPED, "after_gap")
    dropped_orphan = counter(lake_mod.DROPPED, "no_creation")
    closed = lake.close_out(retention=DAY, now=now + timedelta(seconds=DAY + 1))
    assert closed == {"unfinished": 3, "dropped": 1}  # g0005, quiet as long, too
    assert lake.pending() == []
    assert counter(lake_mod.DROPPED, "after_gap") - dropped_gap == 3 * 5  # moves 5..9 of g0002
    # moves 1..6 of g0003, three records each (ActionApplied, CardPlayed, TurnStarted or GameEnded)
    assert counter(lake_mod.DROPPED, "no_creation") - dropped_orphan == 3 * (len(orphan) - 1)

    root = tmp_path / "lake"
    games = {
        r[0]: r[1:]
        for r in read(root, "games")
        .select("game_id, status, moves, ended_at IS NULL, winners, result IS NULL, resumed_into")
        .fetchall()
    }
    assert games == {
        "g0001": ("unfinished", 7, True, [], True, None),
        "g0002": ("unfinished", 3, True, [], True, None),
        "g0004": ("resumed", 5, True, [], True, "g0005"),
        "g0005": ("unfinished", 0, True, [], True, None),
        "g0006": ("finished", 4, False, [4 % 3], False, None),  # game_records: the winner is seat moves % 3
    }
    moves = sorted(read(root, "moves").select("game_id, seq").fetchall())
    assert moves == sorted(
        [("g0001", s) for s in range(1, 8)]
        + [("g0002", s) for s in range(1, 4)]
        + [("g0004", s) for s in range(1, 6)]
        + [("g0006", s) for s in range(1, 5)]
    )
    # the report counts results of finished games only, and shows every status
    data = run_queries(root)
    assert data["length"] == [{"game": "hearts", "games": 1, "min": 4, "median": 4, "p90": 4, "max": 4}]
    assert {(r["status"], r["games"]) for r in data["games_by_status"]} == {
        ("finished", 1),
        ("unfinished", 3),
        ("resumed", 1),
    }
    assert read(root, "games").filter("game_id = 'g0005'").select("resumed_from").fetchall() == [("g0004",)]

    # a record of an unfinished game arriving later is dropped and counted; one already landed is not late
    late = counter(lake_mod.LATE)
    staged(lake, upto(abandoned, 9))
    assert counter(lake_mod.LATE) - late == 3 * 2
    assert lake.pending() == [] and not (root / "_staging" / "g0001").exists()
    assert len(read(root, "moves").filter("game_id = 'g0001'").fetchall()) == 7
    # compaction treats them like any landed game
    assert Lake(root, settle=0).compact() > 0
    assert len(read(root, "games").fetchall()) == 5


def test_a_message_may_hold_a_whole_moves_records(tmp_path: Path) -> None:
    """One v2 record (one stream message) holds a whole move: ``records.decode`` returns its event
    Records (ActionApplied or GameCreated, then the move's events, the last one ``end``); staging,
    a redelivery, finishing and the tables count each event once and each move once."""
    from court_analytics import records

    messages = [(body, headers) for _, body, headers in game_records("g0007", 9)]
    decoded = [records.decode(body, headers) for body, headers in messages]
    assert all(len(r) >= 2 and [x.end for x in r] == [False] * (len(r) - 1) + [True] for r in decoded)
    lake = Lake(tmp_path / "lake")
    got = lake.stage_batch(messages[:4]) + lake.stage_batch(messages[4:] + messages[2:5])  # a redelivery too
    assert [len(r) for r in got] == [len(r) for r in decoded] + [len(decoded[s]) for s in (2, 3, 4)]
    assert lake.pending_ended() == ["g0007"] and lake.try_finish("g0007") == "wrote"
    rows = read(tmp_path / "lake", "moves").select("seq, events").fetchall()
    assert sorted(rows) == [(s, len(decoded[s])) for s in range(1, 10)]  # each move's events, once
    assert read(tmp_path / "lake", "games").select("moves, status").fetchall() == [(9, "finished")]


def test_the_lake_on_a_pyarrow_fs_url_that_is_no_local_folder(tmp_path: Path) -> None:
    """COURT_ANALYTICS_LAKE takes any pyarrow.fs URL (s3://, gs://, ...): the lake only goes through
    the URL's file system. Arrow's in-memory file system (``mock://``) stands in for an object store:
    nothing may land in a local folder, and the tables read back through that file system hold every
    game's moves once, also after compaction."""
    import pyarrow.dataset as ds

    before = set(Path.cwd().iterdir())
    lake = Lake("mock:///court-lake", settle=0)
    assert not isinstance(lake.fs, type(Lake(tmp_path / "local").fs))
    moves = {f"g{i:04d}": 3 + i for i in range(4)}
    for game_id, n in moves.items():
        staged(lake, game_records(game_id, n))
        assert lake.try_finish(game_id) == lake_mod.WROTE
        assert lake.done(game_id)
    staged(lake, game_records("g0000", 3))  # a replay: staged again, never landed twice
    lake.try_finish("g0000")
    lake.compact()

    def table(name: str) -> list[dict[str, object]]:
        found = ds.dataset(f"{lake.root}/{name}", filesystem=lake.fs, format="parquet", partitioning="hive")
        return found.to_table().to_pylist()

    rows = table("moves")
    assert sorted((r["game_id"], r["seq"]) for r in rows) == sorted(
        (g, s) for g, n in moves.items() for s in range(1, n + 1)
    )
    assert sorted(r["game_id"] for r in table("games")) == sorted(moves)
    assert set(Path.cwd().iterdir()) == before  # no local folder appeared
