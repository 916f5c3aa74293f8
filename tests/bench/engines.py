"""Engine throughput: random playouts on every registered engine, and Hearts against OpenSpiel.

Bots run playouts on the engines, so this measures exactly that loop: ``to_act`` /
``legal_actions`` / a uniformly random choice / ``apply(..., emit=False)``, from fixed seeds,
for about ``SECONDS`` per game (whole games only). For Hearts it also plays OpenSpiel's
``hearts`` (C++ via pybind) on the same work: single hands passing left (our ``limit=1`` games
end after one hand), the deal included, every player decision (3 pass choices per seat and 52
plays) chosen at random in Python from the engine's legal list, the two engines alternating in
short slices so that load on the machine affects both alike. The figure to watch is the ratio of
actions per second, ours / OpenSpiel's (the target is at least 1.0, issue 34).

Both forms of the engines in one run: the compiled core (mypyc, ``make setup``) in this process, then
the same work on the ``.py`` files in a process with ``COURT_PURE=1``, side by side with the ratio.
And the engines as they were before issue 34's one-core refactor (``BEFORE``, interpreted: ``libs/``
of that commit from ``git archive``, run in a process of its own with it first on ``PYTHONPATH``),
on the same work in the same alternating slices: issue 34 asks every engine for at least 3 x that
figure, and the ratio is printed per game.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# only what the engines of BEFORE also have: this module runs there too (``Before``)
from court_games.registry import GAME_NAMES, get_game

SECONDS = 3.0
MAX_STEPS_PER_GAME = 200_000
REPO = Path(__file__).resolve().parents[2]
BEFORE = "336f25e"  # the last commit before issue 34's one-core refactor (tests/games/corpus.py)
BEFORE_GOAL = 3.0  # issue 34: every engine at least 3 x its speed at BEFORE


def playouts(
    game: Any,
    options: dict[str, Any],
    *,
    seconds: float = SECONDS,
    seed0: int = 1_000,
    rng_seed: str = "bench",
) -> dict[str, float]:
    """Random full games from seeds ``seed0, seed0 + 1, ...`` for about ``seconds``."""
    opts = game.options_from_dict(options)
    rng = random.Random(rng_seed)
    choice = rng.choice
    to_act, legal_actions, apply, is_terminal = game.to_act, game.legal_actions, game.apply, game.is_terminal
    games = actions = 0
    start = time.perf_counter()
    while True:
        state = game.new_game(opts, seed0 + games)
        steps = 0
        while not is_terminal(state):
            acting = to_act(state)
            player = acting[0] if len(acting) == 1 else choice(acting)
            state = apply(state, player, choice(legal_actions(state, player)), False)[0]
            steps += 1
            if steps > MAX_STEPS_PER_GAME:
                raise RuntimeError(f"{game.NAME}: a random game ran past {MAX_STEPS_PER_GAME} actions")
        games += 1
        actions += steps
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            break
    return {
        "games": games,
        "actions": actions,
        "seconds": elapsed,
        "actions_per_s": actions / elapsed,
        "games_per_s": games / elapsed,
    }


def openspiel_hearts_hands(*, seconds: float = SECONDS, rng_seed: str = "bench") -> dict[str, float] | None:
    """OpenSpiel's hearts on our single-hand work: pass left, a shuffled deal, random choices."""
    try:
        import pyspiel
    except ImportError:
        return None
    os_game = pyspiel.load_game("hearts", {"qs_breaks_hearts": False})
    rng = random.Random(rng_seed)
    choice, shuffle = rng.choice, rng.shuffle
    left = 1  # OpenSpiel's pass-direction chance outcome for "left"
    hands = actions = 0
    start = time.perf_counter()
    while True:
        state = os_game.new_initial_state()
        state.apply_action(left)
        deck = list(range(52))
        shuffle(deck)
        for card in deck:
            state.apply_action(card)
        while not state.is_terminal():
            state.apply_action(choice(state.legal_actions()))
            actions += 1
        state.returns()
        hands += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            break
    return {
        "games": hands,
        "actions": actions,
        "seconds": elapsed,
        "actions_per_s": actions / elapsed,
        "games_per_s": hands / elapsed,
    }


def _merge(parts: list[dict[str, float]]) -> dict[str, float]:
    games = sum(p["games"] for p in parts)
    actions = sum(p["actions"] for p in parts)
    seconds = sum(p["seconds"] for p in parts)
    return {
        "games": games,
        "actions": actions,
        "seconds": seconds,
        "actions_per_s": actions / seconds,
        "games_per_s": games / seconds,
    }


def hearts_vs_openspiel(
    *, seconds: float = SECONDS, rounds: int = 6, other: Interpreted | None = None
) -> dict[str, Any]:
    """Both engines in alternating slices (so a busy machine slows both alike), ``seconds`` each;
    with ``other``, the interpreted form's slices too."""
    hearts = get_game("hearts")
    ours: list[dict[str, float]] = []
    theirs: list[dict[str, float]] = []
    interpreted: list[dict[str, float]] = []
    for r in range(rounds):
        # limit 1: every game is exactly one hand
        kw: dict[str, Any] = {
            "seconds": seconds / rounds,
            "seed0": 50_000 + 100_000 * r,
            "rng_seed": f"bench-{r}",
        }
        ours.append(playouts(hearts, {"limit": 1}, **kw))
        if other is not None:
            interpreted.append(other.playouts("hearts", {"limit": 1}, **kw))
        os_part = openspiel_hearts_hands(seconds=seconds / rounds, rng_seed=f"bench-{r}")
        if os_part is None:
            return {"ours": _merge(ours), "interpreted": None, "openspiel": None, "ratio": None}
        theirs.append(os_part)
    mine, os_total = _merge(ours), _merge(theirs)
    return {
        "ours": mine,
        "interpreted": _merge(interpreted) if interpreted else None,
        "openspiel": os_total,
        "ratio": mine["actions_per_s"] / os_total["actions_per_s"],
    }


def _line(label: str, r: dict[str, float], unit: str = "games") -> str:
    return (
        f"{label:<28} {r['actions_per_s']:>12,.0f} actions/s {r['games_per_s']:>10,.1f} {unit}/s"
        f"   ({r['games']} {unit}, {r['actions']} actions, {r['seconds']:.1f} s)"
    )


class Interpreted:
    """The same work on the ``.py`` files: a process of its own with ``COURT_PURE=1``, asked for one
    slice at a time so that both forms run in alternating slices (load affects them alike)."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from tests.bench.engines import _serve; _serve()"],
            cwd=REPO,
            env=env or {**os.environ, "COURT_PURE": "1"},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def playouts(self, name: str, options: dict[str, Any], **kw: Any) -> dict[str, float]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"game": name, "options": options, **kw}) + "\n")
        self.proc.stdin.flush()
        return dict(json.loads(self.proc.stdout.readline()))

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


class Before(Interpreted):
    """The same work on the engines of ``BEFORE``: its ``libs/`` extracted by ``git archive`` to a
    temporary folder, first on ``PYTHONPATH`` of a process of its own (they were interpreted
    Python, ``court_games/games/<game>.py``). ``Before.start()`` is None where the repository's
    history is not there (a source archive, not a clone)."""

    def __init__(self, libs: Path, tmp: str) -> None:
        self.tmp = tmp
        path = os.pathsep.join(p for p in (str(libs), os.environ.get("PYTHONPATH", "")) if p)
        super().__init__({**os.environ, "PYTHONPATH": path, "COURT_PURE": "1"})

    @classmethod
    def start(cls) -> Before | None:
        tmp = tempfile.mkdtemp(prefix="court-bench-before-")
        try:
            archive = subprocess.run(
                ["git", "-C", str(REPO), "archive", BEFORE, "libs"], capture_output=True, check=True
            ).stdout
            subprocess.run(["tar", "-x", "-C", tmp], input=archive, capture_output=True, check=True)
        except (OSError, subprocess.CalledProcessError) as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            why = (
                exc.stderr.decode(errors="replace").strip()
                if isinstance(exc, subprocess.CalledProcessError)
                else exc
            )
            print(f"{BEFORE} engines skipped: git archive {BEFORE} failed ({why})")
            return None
        return cls(Path(tmp) / "libs", tmp)

    def close(self) -> None:
        try:
            super().close()
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)


def _serve() -> None:
    """The other side of ``Interpreted`` and ``Before``: one slice of playouts per line read."""
    try:
        from court_games import _form
    except ImportError:  # BEFORE's engines: interpreted, no _form yet
        pass
    else:
        assert _form.FORM == "interpreted", _form.FORM
    for line in sys.stdin:
        ask = json.loads(line)
        game = get_game(ask.pop("game"))
        print(json.dumps(playouts(game, ask.pop("options"), **ask)), flush=True)


def main() -> None:
    from court_games import _form  # not at the top: BEFORE's court_games has no _form

    print(
        f"random playouts: legal_actions + apply(emit=False), ~{SECONDS:.0f} s per game and form, default options"
    )
    print(
        f"court_games here: {_form.FORM}"
        + ("" if _form.FORM == "compiled" else " (no compiled core: make setup)")
        + f"; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    other = Interpreted() if _form.FORM == "compiled" else None
    before = Before.start()
    rounds = 6
    try:
        for name in GAME_NAMES:
            try:
                game = get_game(name)
            except Exception as exc:  # an engine still being written: note it and go on
                print(f"{name:<28} skipped: module does not import ({type(exc).__name__}: {exc})")
                continue
            here: list[dict[str, float]] = []
            there: list[dict[str, float]] = []
            then: list[dict[str, float]] = []
            for r in range(rounds):
                kw: dict[str, Any] = {
                    "seconds": SECONDS / rounds,
                    "seed0": 1_000 + 10_000 * r,
                    "rng_seed": f"b{r}",
                }
                here.append(playouts(game, {}, **kw))
                if other is not None:
                    there.append(other.playouts(name, {}, **kw))
                if before is not None:
                    then.append(before.playouts(name, {}, **kw))
            print(_line(f"{name} ({_form.FORM})", _merge(here)))
            if there:
                print(_line(f"{name} (interpreted)", _merge(there)))
                ratio = _merge(here)["actions_per_s"] / _merge(there)["actions_per_s"]
                print(f"{'':<28} compiled/interpreted: {ratio:.2f}")
            if then:
                print(_line(f"{name} ({BEFORE}, interpreted)", _merge(then)))
                ratio = _merge(here)["actions_per_s"] / _merge(then)["actions_per_s"]
                print(f"{'':<28} {_form.FORM}/{BEFORE}: {ratio:.2f}  (target >= {BEFORE_GOAL:.0f}, issue 34)")
        try:
            get_game("hearts")
        except Exception:
            return
        print("\nHearts single hands (pass left, deal included), same work on both engines:")
        cmp = hearts_vs_openspiel(other=other)
        print(_line(f"hearts (ours, {_form.FORM})", cmp["ours"], "hands"))
        if cmp["interpreted"] is not None:
            print(_line("hearts (ours, interpreted)", cmp["interpreted"], "hands"))
        if cmp["openspiel"] is None:
            print("openspiel                    skipped: pyspiel is not installed")
            return
        print(_line("hearts (OpenSpiel, C++)", cmp["openspiel"], "hands"))
        os_rate = cmp["openspiel"]["actions_per_s"]
        ratios = f"{_form.FORM} {cmp['ratio']:.2f}"
        if cmp["interpreted"] is not None:
            ratios += f", interpreted {cmp['interpreted']['actions_per_s'] / os_rate:.2f}"
        print(f"ratio ours/OpenSpiel (actions/s): {ratios}  (target >= 1.0, issue 34)")
    finally:
        if other is not None:
            other.close()
        if before is not None:
            before.close()


if __name__ == "__main__":
    main()
