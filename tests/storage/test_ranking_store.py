"""The ranking store against SQLite and PostgreSQL alike: the ledger, antes, events, ratings, boards."""

from __future__ import annotations

import random
import threading

import pytest
from court_games.queens_court import accounting as qca
from court_kit.errors import FailedPrecondition, InvalidArgument, NotFound
from court_ranking.store import RankingStore, migrate
from court_store import current_revision, make_engine
from sqlalchemy import inspect

from .db import db_url  # noqa: F401  (the parametrised fixture)
from .games import play_queens_court

PLAYERS = [("p-ann", "Ann"), ("p-bob", "Bob"), ("p-cy", "Cy")]


@pytest.fixture
def store(db_url):  # noqa: F811
    engine = make_engine(db_url)
    migrate(engine)
    yield RankingStore(engine)
    engine.dispose()


def _keys(events: list[dict]) -> list[tuple[int, int, bool]]:
    """(move seq, index, last of its move) per event, as the rules service numbers them: the opening
    events are seq 0, each move's events (starting with its CardPlayed) the next seq."""
    starts = [i for i, e in enumerate(events) if e["type"] == "CardPlayed"]
    keys, seq, idx = [], 0, -1
    for i in range(len(events)):
        if i in starts:
            seq, idx = seq + 1, -1
        idx += 1
        keys.append((seq, idx, i + 1 == len(events) or i + 1 in starts))
    return keys


def _feed(store: RankingStore, game_id: str, events: list[dict], order: list[int] | None = None) -> None:
    keys = _keys(events)
    for i in order if order is not None else range(len(events)):
        seq, idx, last = keys[i]
        store.take_event(game_id, seq, idx, events[i], last)


def _expected(events: list[dict], result: dict, ante: int, seed: int) -> dict[int, int]:
    """Every seat's change over the game, from the events and the accounting module's catalogue."""
    n = len(result["round_wins"])
    total = dict.fromkeys(range(n), 0)
    for e in events:
        if e["type"] == "RoundEnded":
            for s, d in qca.round_rank_points(e, n).items():
                total[s] += d
    total[result["winner"]] += 2 * ante
    for s in range(n):
        total[s] -= ante
    for s, pay in qca.challenge_payouts(events, n, qca.assign_challenges(seed, n)).items():
        total[s] += pay
    return total


def _expected_with_bots(
    events: list[dict], result: dict, ante: int, bots: list[bool], assignment: dict | None = None
) -> dict[int, int]:
    """docs/rules/queens_court.md's "Bots and rank points", written out on its own: the people's change per seat."""
    n = len(bots)
    people = [s for s in range(n) if not bots[s]]
    total = dict.fromkeys(range(n), 0)
    for e in events:
        if e["type"] != "RoundEnded" or not e["winners"]:
            continue
        human_losers = [s for s in people if s not in e["winners"]]
        human_winners = [s for s in people if s in e["winners"]]
        for s in human_losers:
            total[s] -= 100
        if human_winners:
            share, rest = divmod(100 * len(human_losers), len(human_winners))
            for s in human_winners:
                total[s] += share
            order = [(e["starter"] + k) % n for k in range(1, n + 1)]
            total[next(s for s in order if s in human_winners)] += rest
    for s in people:
        total[s] -= ante
    w = result["winner"]
    if not bots[w]:
        total[w] += 2 * ante if len(people) >= 2 else ante
    if len(people) >= 2 and assignment is not None:
        for s, pay in qca.challenge_payouts(events, n, assignment).items():
            if not bots[s]:
                total[s] += pay
    return total


class TestRankingStore:
    def test_migrations_make_every_table_and_run_again_as_a_no_op(self, store):
        names = set(inspect(store.engine).get_table_names())
        assert {
            "rk_ledger",
            "rk_game",
            "rk_event",
            "rk_challenge",
            "rk_player",
            "rk_rating",
            "alembic_version_ranking",
        } <= names
        assert current_revision(store.engine, "ranking") == "0003"
        assert migrate(store.engine) == "0003"

    def test_the_balance_migration_keeps_every_existing_balance(self, db_url):  # noqa: F811
        """0003 puts the balance on rk_player: a database of 0002 keeps every player's points."""
        from court_ranking.store import MIGRATIONS
        from court_store import upgrade
        from sqlalchemy import text

        engine = make_engine(db_url)
        try:
            assert upgrade(engine, MIGRATIONS, "ranking", "0002") == "0002"
            with engine.begin() as conn:
                for pid, points in (("p-ann", [1000, -150, 450]), ("p-bob", [1000, -150]), ("p-cy", [1000])):
                    conn.execute(
                        text(
                            "INSERT INTO rk_player (player_id, name, created_at) VALUES "
                            "(:p, '', CURRENT_TIMESTAMP)"
                        ),
                        {"p": pid},
                    )
                    for i, amount in enumerate(points):
                        conn.execute(
                            text(
                                "INSERT INTO rk_ledger (player_id, game_id, game, round, reason, amount, "
                                "created_at) VALUES (:p, :g, '', -1, 'x', :a, CURRENT_TIMESTAMP)"
                            ),
                            {"p": pid, "g": f"g{i}", "a": amount},
                        )
            assert migrate(engine) == "0003"
            store = RankingStore(engine)
            assert [store.balance(p, ensure=False) for p in ("p-ann", "p-bob", "p-cy")] == [1300, 850, 1000]
        finally:
            engine.dispose()

    def test_a_new_player_opens_with_1000_points_once(self, store):
        assert store.balance("p-new") == 1000
        store.ensure_player("p-new", "New")
        store.ensure_player("p-new", "New")
        assert store.balance("p-new") == 1000
        (entry,) = store.history("p-new")
        assert (entry.reason, entry.amount) == ("opening", 1000)

    def test_the_ante_is_deducted_exactly_once(self, store):
        info, new = store.open_game("g1", "queens_court", True, 300, 7, PLAYERS)
        assert new and len(info.assignment) == 3 and all(len(v) == 3 for v in info.assignment.values())
        again, new2 = store.open_game("g1", "queens_court", True, 300, 7, PLAYERS)
        assert not new2 and again == info
        assert [store.balance(p) for p, _ in PLAYERS] == [700, 700, 700]

    def test_an_ante_above_a_balance_deducts_nothing_from_anyone(self, store):
        store.open_game("g1", "queens_court", True, 800, 7, PLAYERS[:2])
        with pytest.raises(FailedPrecondition, match="p-ann"):
            store.open_game("g2", "queens_court", True, 300, 8, PLAYERS)
        assert [store.balance(p) for p, _ in PLAYERS] == [200, 200, 1000]
        assert store.game_info("g2", missing_ok=True) is None

    def test_bad_registrations_are_refused(self, store):
        with pytest.raises(InvalidArgument):
            store.open_game("g1", "hearts", True, 100, 1, PLAYERS)
        with pytest.raises(InvalidArgument):
            store.open_game("g1", "queens_court", False, 100, 1, PLAYERS)
        with pytest.raises(InvalidArgument):
            store.open_game("g1", "queens_court", True, 100, 1, [PLAYERS[0], PLAYERS[0]])
        with pytest.raises(InvalidArgument):
            store.open_game("g1", "queens_court", True, 100, 1, PLAYERS * 2)
        with pytest.raises(InvalidArgument):
            store.open_game("x" * 65, "queens_court", True, 100, 1, PLAYERS)
        assert store.balance("p-ann") == 1000

    def test_two_games_racing_for_the_same_points_cannot_both_take_them(self, store):
        results: list[object] = []
        barrier = threading.Barrier(2)

        def start(game_id: str, seed: int) -> None:
            barrier.wait()
            try:
                store.open_game(game_id, "queens_court", True, 600, seed, PLAYERS[:2])
                results.append("ok")
            except FailedPrecondition as exc:
                results.append(exc)

        store.ensure_player("p-ann")
        store.ensure_player("p-bob")
        threads = [threading.Thread(target=start, args=(f"race{i}", i)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert sorted(map(str, results)).count("ok") == 1
        assert store.balance("p-ann") == store.balance("p-bob") == 400

    @pytest.mark.slow
    def test_a_whole_game_redelivered_out_of_order_pays_exactly_once(self, store):
        seed = 4242
        events, result = play_queens_court(seed, 3, move_seed=5)
        store.open_game("g1", "queens_court", True, 250, seed, PLAYERS)
        order = list(range(len(events)))
        random.Random(9).shuffle(order)
        _feed(store, "g1", events, order + order[: len(order) // 2])  # shuffled, half of it twice
        _feed(store, "g1", events)  # and the whole game replayed in order
        want = _expected(events, result, 250, seed)
        assert [store.balance(p) for p, _ in PLAYERS] == [1000 + want[s] for s in range(3)]
        assert store.game_status("g1") == "finished"
        rounds = [e for e in store.entries_of_game("g1") if e.reason == "round"]
        assert {e.round for e in rounds} == {r for r in range(len(result["rounds"]))}

    def test_nothing_is_paid_past_a_gap_until_it_is_filled(self, store):
        seed = 99
        events, result = play_queens_court(seed, 3, move_seed=2)
        store.open_game("g1", "queens_court", True, 100, seed, PLAYERS)
        first_round_end = next(i for i, e in enumerate(events) if e["type"] == "RoundEnded")
        _feed(store, "g1", events, [i for i in range(len(events)) if i != first_round_end - 1])
        assert [store.balance(p) for p, _ in PLAYERS] == [900, 900, 900]  # only the antes so far
        assert store.game_status("g1") == "active"
        _feed(store, "g1", events, [first_round_end - 1])
        want = _expected(events, result, 100, seed)
        assert [store.balance(p) for p, _ in PLAYERS] == [1000 + want[s] for s in range(3)]

    def test_the_prefix_waits_for_the_end_of_each_move(self, store):
        events, _ = play_queens_court(8, 2)
        store.open_game("g1", "queens_court", True, 0, 8, PLAYERS[:2])
        keys = _keys(events)
        first_move = [i for i, k in enumerate(keys) if k[0] == 1]
        opening = [i for i, k in enumerate(keys) if k[0] == 0]
        _feed(store, "g1", events, opening[:-1] + first_move)  # the opening's last event is missing
        assert len(store.events("g1")) == len(opening) - 1
        assert not store.covers("g1", *keys[first_move[0]][:2])
        _feed(store, "g1", events, opening[-1:])
        assert store.covers("g1", *keys[first_move[-1]][:2])
        assert len(store.events("g1")) == len(opening) + len(first_move)

    def test_a_local_game_moves_no_points(self, store):
        events, _ = play_queens_court(5, 3)
        store.open_game("local", "queens_court", False, 0, 5, PLAYERS)
        _feed(store, "local", events)
        assert [store.balance(p) for p, _ in PLAYERS] == [1000, 1000, 1000]
        assert store.rating("p-ann", "queens_court").games == 0

    def test_events_of_an_unregistered_game_are_ignored(self, store):
        events, _ = play_queens_court(5, 3)
        assert not store.record_event("nobody", 0, 0, events[0], False)
        assert store.settle("nobody") == 0

    def test_abandoning_refunds_every_ante_once_and_pays_nothing_after(self, store):
        events, _ = play_queens_court(11, 3)
        store.open_game("g1", "queens_court", True, 400, 11, PLAYERS)
        half = len(events) // 2
        _feed(store, "g1", events[:half])
        mid = [store.balance(p) for p, _ in PLAYERS]
        assert store.abandon_game("g1") == 3
        assert store.abandon_game("g1") == 0
        assert [store.balance(p) for p, _ in PLAYERS] == [b + 400 for b in mid]
        keys = _keys(events)
        for i in range(half, len(events)):
            seq, idx, last = keys[i]
            store.record_event("g1", seq, idx, events[i], last)
        assert store.settle("g1") == 0
        assert [store.balance(p) for p, _ in PLAYERS] == [b + 400 for b in mid]
        assert (
            store.abandon_game("nope") == 0
        )  # never registered: void, and a late registration takes nothing
        with pytest.raises(FailedPrecondition, match="abandoned"):
            store.open_game("nope", "queens_court", True, 400, 1, PLAYERS)
        assert store.audit()["violations"] == []

    def test_a_finished_game_cannot_be_abandoned(self, store):
        events, _ = play_queens_court(12, 2)
        store.open_game("g1", "queens_court", True, 50, 12, PLAYERS[:2])
        _feed(store, "g1", events)
        with pytest.raises(FailedPrecondition):
            store.abandon_game("g1")

    def test_ratings_move_once_per_game_and_order_the_leaderboard(self, store):
        events, result = play_queens_court(21, 3, move_seed=3)
        store.open_game("g1", "queens_court", True, 0, 21, PLAYERS)
        _feed(store, "g1", events)
        _feed(store, "g1", events)
        winner = PLAYERS[result["winner"]][0]
        ratings = {p: store.rating(p, "queens_court") for p, _ in PLAYERS}
        assert all(r.games == 1 for r in ratings.values())
        assert max(ratings.values(), key=lambda r: r.ordinal).player_id == winner
        board = store.leaderboard("queens_court", "rating", limit=10)
        assert board[0].player_id == winner and [b.rank for b in board] == [1, 2, 3]
        assert store.rank_of(winner, "queens_court") == 1
        points = store.leaderboard("queens_court", "points", limit=2)
        assert len(points) == 2 and points[0].value >= points[1].value
        assert store.rank_of("p-nobody", "queens_court") is None

    def test_the_page_around_me(self, store):
        for k in range(6):  # pairs p00 p01, p02 p03, ... paying antes of 10, 20, ...
            pair = [(f"p{2 * k + j:02d}", "") for j in range(2)]
            store.open_game(f"g{k}", "queens_court", True, 10 * (k + 1), k, pair)
        board = store.leaderboard("queens_court", "points", limit=12)
        assert [b.player_id for b in board] == [f"p{k:02d}" for k in range(12)]
        page = store.around("p08", "queens_court", "points", limit=5)
        assert [b.player_id for b in page] == ["p06", "p07", "p08", "p09", "p10"]
        assert [b.rank for b in page] == [7, 8, 9, 10, 11]

    def test_challenges_progress_is_reported_per_seat(self, store):
        events, _ = play_queens_court(31, 3)
        store.open_game("g1", "queens_court", True, 0, 31, PLAYERS)
        _feed(store, "g1", events)
        info, progress = store.challenges("g1")
        assert set(progress) == {0, 1, 2}
        for seat, rows in progress.items():
            assert [r["tier"] for r in rows] == [50, 100, 200]
            paid = sum(
                e.amount
                for e in store.entries_of_game("g1")
                if e.player_id == info.players[seat] and e.reason.startswith("challenge:")
            )
            assert paid == sum(r["points"] for r in rows if r["completed"])

    def test_bot_seats_hold_no_points_and_no_rating(self, store):
        events, result = play_queens_court(77, 3, move_seed=4)
        seats = [PLAYERS[0], ("bot:random", "Bot"), ("bot:random", "Bot")]
        store.open_game("g1", "queens_court", True, 200, 77, seats)
        _feed(store, "g1", events)
        want = _expected_with_bots(events, result, 200, [False, True, True])
        assert store.balance("p-ann") == 1000 + want[0] <= 1000
        assert {e.player_id for e in store.entries_of_game("g1")} <= {"p-ann"}
        assert not [e for e in store.entries_of_game("g1") if e.reason.startswith("challenge:")]
        assert store.rating("p-ann", "queens_court").games == 0  # rated only among people
        assert store.leaderboard("queens_court", "rating") == []
        assert store.audit()["violations"] == []

    @pytest.mark.parametrize("seed", range(101, 113))
    def test_a_person_playing_only_bots_never_ends_above_their_start(self, store, seed):
        """docs/rules/queens_court.md "Bots and rank points": human losers pay, bots never do; beating only bots gets
        one's own ante back, no more; challenges pay nothing without another person."""
        n = 2 + seed % 3
        events, result = play_queens_court(seed, n, move_seed=seed)
        me = seed % n
        seats = [
            PLAYERS[0] if s == me else (f"bot:{'random' if s % 2 else 'expert'}", "Bot") for s in range(n)
        ]
        store.open_game(f"g{seed}", "queens_court", True, 150, seed, seats)
        _feed(store, f"g{seed}", events)
        want = _expected_with_bots(events, result, 150, [s != me for s in range(n)])
        assert store.balance("p-ann") == 1000 + want[me] <= 1000
        assert store.audit()["violations"] == []

    def test_people_and_bots_at_one_table_move_points_only_between_people(self, store):
        events, result = play_queens_court(31, 4, move_seed=2)
        seats = [PLAYERS[0], ("bot:random", "Bot"), PLAYERS[1], ("bot:heuristic", "Bot")]
        store.open_game("g1", "queens_court", True, 100, 31, seats)
        _feed(store, "g1", events)
        bots = [False, True, False, True]
        want = _expected_with_bots(events, result, 100, bots, qca.assign_challenges(31, 4))
        assert [store.balance("p-ann"), store.balance("p-bob")] == [1000 + want[0], 1000 + want[2]]
        assert store.audit()["violations"] == []

    def test_profile(self, store):
        store.open_game("g1", "queens_court", True, 100, 1, PLAYERS)
        p = store.profile("p-ann")
        assert (p["name"], p["balance"], p["games"]) == ("Ann", 900, 1)
        with pytest.raises(NotFound):
            store.profile("p-zed")
