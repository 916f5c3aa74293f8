"""The engine corpus: 1,000 random games per game, recorded on the engines as they were before the
one-core refactor (issue 34: 336f25e, interpreted, ``court_games/games/<game>.py``), replayed on
today's core in both forms by tests/games/test_corpus.py.

A recorded game is its options, its seed, its moves (the acting seat and the index of the chosen
action in that seat's sorted legal actions) and one SHA-256 over everything the engine said while
it was played: the opening events, at every step the seats to act and the acting seat's legal
actions in their JSON form, the events of every move, every seat's view and the spectator's every
16 steps and at the end, and the result. So a replay that differs anywhere (a legal move added or
missing, another order, an event, a view, a score) changes the digest. Only the registry's module
interface is used (``court_games.registry.GameModule``), the same before and after the refactor,
so this file records on the old tree too:

    git archive 336f25e libs | tar -x -C /tmp/old
    PYTHONPATH=/tmp/old/libs .venv/bin/python -m tests.games.corpus tests/games/corpus.json.gz

(the module checks it runs on the old tree's ``court_games.games`` layout before recording).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import sys
from pathlib import Path
from typing import Any

from court_games import get_game

CORPUS = Path(__file__).with_name("corpus.json.gz")
GAMES = ("hearts", "queens_court", "the_court", "court_wars")
PER_GAME = 1000
VIEW_EVERY = 16
SEED_BASE = 9_006_000_000  # a seed per game: SEED_BASE + 7919 * index


def _feed(h: Any, obj: Any) -> None:
    h.update(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode())
    h.update(b"\n")


# Per-seat view keys added after the recording, by design (each with its own test): left out of
# the digest, so that the recorded games still pin everything the old engines said.
SEAT_KEYS_ADDED = {"court_wars": ("attacks",)}  # issue 34: the attacks each seat has made


def _as_recorded(name: str, view: dict[str, Any]) -> dict[str, Any]:
    added = SEAT_KEYS_ADDED.get(name)
    if not added:
        return view
    seats = [{k: v for k, v in p.items() if k not in added} for p in view["players"]]
    return {**view, "players": seats}


def _views(h: Any, mod: Any, state: Any) -> None:
    for seat in [*range(mod.num_players(state)), None]:
        _feed(h, _as_recorded(mod.NAME, mod.view(state, seat)))


def play(name: str, options: dict[str, Any], seed: int, moves: list[list[int]] | None) -> dict[str, Any]:
    """Play one game: the given ``moves`` (a replay), or moves drawn at random from the seed (a
    recording). Returns the record: options, seed, moves, steps and the digest."""
    mod = get_game(name)
    h = hashlib.sha256()
    chooser = random.Random(seed ^ 0x5EED)
    state, events = mod.start(mod.options_from_dict(options), seed)
    _feed(h, [e.full() for e in events])
    played: list[list[int]] = []
    step = 0
    while not mod.is_terminal(state):
        seats = list(mod.to_act(state))
        if moves is None:
            seat = seats[chooser.randrange(len(seats))]
        else:
            if step >= len(moves):
                raise AssertionError(f"{name} seed {seed}: not over after the {len(moves)} recorded moves")
            seat = moves[step][0]
        legal = mod.legal_actions(state, seat)
        index = chooser.randrange(len(legal)) if moves is None else moves[step][1]
        _feed(h, [seats, seat, [mod.action_to_json(a, seat) for a in legal], index])
        state, events = mod.apply(state, seat, legal[index])
        _feed(h, [e.full() for e in events])
        played.append([seat, index])
        step += 1
        if step % VIEW_EVERY == 0:
            _views(h, mod, state)
    if moves is not None and step != len(moves):
        raise AssertionError(f"{name} seed {seed}: over after {step} of the {len(moves)} recorded moves")
    _views(h, mod, state)
    _feed(h, mod.result(state))
    return {"game": name, "options": options, "seed": seed, "moves": played, "sha256": h.hexdigest()}


def record(per_game: int = PER_GAME) -> list[dict[str, Any]]:
    out = []
    for name in GAMES:
        sets = get_game(name).TEST_OPTION_SETS
        for i in range(per_game):
            out.append(play(name, dict(sets[i % len(sets)]), SEED_BASE + 7919 * i, None))
    return out


def load(path: Path = CORPUS) -> list[dict[str, Any]]:
    with gzip.open(path, "rt") as f:
        data: list[dict[str, Any]] = json.load(f)["games"]
    return data


def main(argv: list[str]) -> int:
    import court_games

    if not (Path(court_games.__file__).parent / "games" / "hearts.py").exists():
        print(
            "corpus: record on the engines before the refactor (see this module's docstring)", file=sys.stderr
        )
        return 2
    games = record()
    body = {
        "about": "tests/games/corpus.py: recorded on the engines of 336f25e (before issue 34's one-core refactor)",
        "games": games,
    }
    with gzip.GzipFile(argv[0], "wb", mtime=0) as f:
        f.write(json.dumps(body, separators=(",", ":")).encode())
    print(f"corpus: {len(games)} games, {sum(len(g['moves']) for g in games)} moves -> {argv[0]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
