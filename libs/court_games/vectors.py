"""Replays test vectors (docs/rules/README.md): ``court-vectors FILE.json...``.

Prints one JSON object per file (a JSON list when given several)::

    {"steps": [{"legal": [...], "error": null}, ...], "result": {...}, "state": {...}}

``legal`` lists the canonical actions of the seat to act before the step (of
the seat named in the step during simultaneous phases); an illegal or
malformed action records its message in ``error`` and leaves the state as it
was. With ``expect`` present the exit status is 1 when any key of ``expect``
differs from the result (the differences go to stderr). A vector that cannot
be replayed at all (unknown game, bad options, a deck that repeats or names an
unknown card) prints ``{"invalid": "<why>"}`` and exits 2.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from .core import GameError, InvalidVector
from .registry import get_game


def _legal_for(game: Any, state: Any, player: Any) -> tuple[int | None, tuple[Any, ...]]:
    acting = game.to_act(state)
    if not acting:
        return None, ()
    who = player if (len(acting) > 1 and player in acting) else acting[0]
    return who, game.legal_actions(state, who)


def replay(vector: Mapping[str, Any]) -> dict[str, Any]:
    """Replay one vector; raises ``InvalidVector`` when it cannot be replayed."""
    if not isinstance(vector, Mapping):
        raise InvalidVector("a vector is a JSON object with game, options, decks, actions")
    name = vector.get("game")
    try:
        game = get_game(cast(str, name))  # any other value is refused there by name
    except GameError as exc:
        raise InvalidVector(str(exc)) from exc
    options = dict(vector.get("options") or {})
    seed = options.pop("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise InvalidVector(f"options.seed must be an integer, got {seed!r}")
    decks = vector.get("decks")
    if decks is not None and not isinstance(decks, list):
        raise InvalidVector("decks must be a list of decks (each a list of cards, top first)")
    try:
        opts = game.options_from_dict(options)
        state = game.new_game(opts, seed, decks=decks)
    except InvalidVector:
        raise
    except GameError as exc:
        raise InvalidVector(str(exc)) from exc
    actions = vector.get("actions") or []
    if not isinstance(actions, list):
        raise InvalidVector("actions must be a list")
    steps = []
    for raw in actions:
        player = raw.get("player") if isinstance(raw, Mapping) else None
        who, legal = _legal_for(game, state, player)
        step: dict[str, Any] = {"legal": [game.action_to_json(a, who) for a in legal], "error": None}
        try:
            if not isinstance(raw, Mapping):
                raise InvalidVector("each action is a JSON object")
            if isinstance(player, bool) or not isinstance(player, int):
                raise GameError(f"action {dict(raw)!r} must name its player as an integer seat")
            action = game.action_from_json(raw)
            state, _events = game.apply(state, player, action, emit=False)
        except InvalidVector as exc:
            step["error"] = str(exc)
        except GameError as exc:
            step["error"] = str(exc)
        steps.append(step)
    return {"steps": steps, "result": game.result(state), "state": game.view(state, None)}


def mismatches(expect: Mapping[str, Any], result: Mapping[str, Any]) -> list[str]:
    return [
        f"{key}: expected {json.dumps(want)}, got {json.dumps(result.get(key))}"
        for key, want in expect.items()
        if result.get(key) != want
    ]


def run_file(path: str | Path) -> tuple[dict[str, Any], int]:
    """Replay one file; returns (output object, exit status)."""
    try:
        vector = json.loads(Path(path).read_text())
        out = replay(vector)
    except (OSError, ValueError) as exc:
        return {"invalid": f"{path}: cannot read vector: {exc}"}, 2
    except InvalidVector as exc:
        return {"invalid": f"{path}: {exc}"}, 2
    expect = vector.get("expect")
    if isinstance(expect, Mapping):
        bad = mismatches(expect, out["result"])
        if bad:
            for line in bad:
                print(f"{path}: {line}", file=sys.stderr)
            return out, 1
    return out, 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or any(a in ("-h", "--help") for a in args):
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        print("usage: court-vectors FILE.json [FILE.json ...]", file=sys.stderr)
        return 0 if args else 2
    outputs, status = [], 0
    for path in args:
        out, code = run_file(path)
        if "invalid" in out:
            print(out["invalid"], file=sys.stderr)
        outputs.append(out)
        status = max(status, code)
    print(json.dumps(outputs[0] if len(outputs) == 1 else outputs))
    return status


if __name__ == "__main__":
    sys.exit(main())
