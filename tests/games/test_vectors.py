"""Every vector under tests/vectors/ replays and matches its expect (run through the console script too)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from court_games.vectors import mismatches, replay, run_file

VECTORS = sorted((Path(__file__).parent.parent / "vectors").glob("*/*.json"))


@pytest.mark.parametrize("path", VECTORS, ids=[f"{p.parent.name}/{p.stem}" for p in VECTORS])
def test_vector(path):
    vector = json.loads(path.read_text())
    assert "expect" in vector, "every committed vector states what it expects"
    assert vector.get("name") and vector.get("rule"), "every vector names the rule edge it covers"
    out = replay(vector)
    assert mismatches(vector["expect"], out["result"]) == []
    for step, want in zip(out["steps"], vector.get("expect_steps", []), strict=False):
        if want is not None:
            assert step["error"] is not None if want == "error" else step["error"] is None


def test_enough_vectors_per_game():
    for game in ("queens_court", "hearts", "the_court", "court_wars"):
        assert len(list((Path(__file__).parent.parent / "vectors" / game).glob("*.json"))) >= 10, game


def test_console_script_runs_all_vectors():
    exe = Path(sys.executable).parent / "court-vectors"
    proc = subprocess.run([str(exe), *map(str, VECTORS)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    outs = json.loads(proc.stdout)
    assert isinstance(outs, list) and len(outs) == len(VECTORS)
    assert all({"steps", "result", "state"} <= set(o) for o in outs)


def test_invalid_deck_is_reported(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            {
                "game": "queens_court",
                "options": {"players": 2},
                "decks": [["5H", "5H", "2C", "3C", "4C", "6C", "7C", "8C", "9C", "TC"]],
                "actions": [],
            }
        )
    )
    out, code = run_file(bad)
    assert code == 2 and "repeats" in out["invalid"]
    bad.write_text(json.dumps({"game": "nope", "actions": []}))
    out, code = run_file(bad)
    assert code == 2 and "unknown game" in out["invalid"]


def test_expect_mismatch_exits_nonzero(tmp_path):
    v = json.loads(VECTORS[0].read_text())
    v["expect"] = {"finished": "certainly not"}
    p = tmp_path / "v.json"
    p.write_text(json.dumps(v))
    _, code = run_file(p)
    assert code == 1
