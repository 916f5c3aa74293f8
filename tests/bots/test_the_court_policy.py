"""The Court's heuristic policy (``court_bots.games.the_court_policy``) in its two forms: compiled
by mypyc with the games' core, and interpreted (``COURT_PURE=1``). Each plays the same seeded games
of every mode in a fresh interpreter, and every action must be the same: the heuristic's choices on
every position (engine-driven games: every action of every seat), the end of a rollout from each
position (actions and scores of whole games on the simulator), and the expert's decisions at a
fixed number of sampled worlds (rollouts of every candidate, the utilities compared)."""

from __future__ import annotations

import importlib.machinery
import json
import os
import subprocess
import sys

import pytest
from court_games import _form

# Plays the games and prints every action, which file the policy came from and which form ran.
PROBE = r"""
import json, random
from court_games import _form
from court_games.the_court import engine as g
from court_games.the_court import fast as F
from court_bots.games import the_court as bot
from court_bots.games import the_court_policy as policy

GAMES = {GAMES}
out = []
for mode in g.MODES:
    for seed in range(GAMES):
        st = g.new_game(g.Options(mode), 7000 + seed)
        rng = random.Random(f"policy-{{mode}}-{{seed}}")
        moves = []
        while not g.is_terminal(st):
            p = rng.choice(g.to_act(st))
            s = F.sim_from_state(st)
            a = bot.choose(s, p)
            end = bot.rollout(s.copy())
            moves.append([p, list(a), end.scores()])
            if seed % 4 == 0 and len(g.legal_actions(st, p)) > 1:  # the expert, at a fixed effort
                v = g.view(st, p)
                sample = bot.determinize(v, p, rng)
                a, _ = bot.expert(v, p, sample, g.legal_actions(sample, p), rng, 1e9, iterations=3)
                moves.append([p, list(a), "expert"])
            elif rng.random() < 0.3:  # off the heuristic's path now and then
                legal = g.legal_actions(st, p)
                a = legal[rng.randrange(len(legal))]
            st = g.apply(st, p, tuple(a), False)[0]
        out.append([mode, seed, moves, [pl.score for pl in st.players]])
print(json.dumps({{"form": _form.FORM, "file": policy.__file__, "games": out}}))
"""


def play(*, pure: bool, games: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "COURT_PURE"}
    if pure:
        env["COURT_PURE"] = "1"
    proc = subprocess.run(
        [sys.executable, "-c", PROBE.format(GAMES=games)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout)


def test_the_policy_module_is_compiled_with_the_core():
    assert "court_bots/games/the_court_policy.py" in _form.ALSO_COMPILED
    assert (
        _form.PACKAGE_DIR.parent.joinpath("court_bots/games/the_court_policy.py") in _form.compiled_sources()
    )


def test_compiled_and_interpreted_policies_make_the_same_choices():
    if os.environ.get("COURT_COMPILE") == "0":
        pytest.skip("COURT_COMPILE=0: no compiled core to compare (only the .py files run here)")
    assert _form.built() and not _form.stale(), "the compiled core is missing or stale: run make setup"
    compiled = play(pure=False, games=12)
    pure = play(pure=True, games=12)
    assert compiled["form"] == "compiled" and pure["form"] == "interpreted"
    assert compiled["file"].endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)), compiled["file"]
    assert pure["file"].endswith("the_court_policy.py"), pure["file"]
    moves = sum(len(g[2]) for g in pure["games"])
    assert moves > 2000 and sum(1 for g in pure["games"] for m in g[2] if m[2] == "expert") > 100
    for c, p in zip(compiled["games"], pure["games"], strict=True):
        assert c == p, (p[0], p[1])  # mode, seed: the first game where the forms differ
