"""Turning what a person types into an action of the game.

Accepted, in this order:

* a number from the list of legal actions the client shows (``3``);
* a command: ``h``/``help``, ``hint`` (ask the bot service), ``t``/``table`` (show the table
  again), ``q``/``quit`` (leave; the game stays saved);
* the canonical JSON of docs/rules/ (``{"type": "play", "card": "2C"}``);
* a short form: the action type, then its fields in order, the type left out for a game's
  everyday action: ``5H 1 left`` (Queen's Court: card, target seat, pile), ``2C`` (Hearts),
  ``pass QS AH KH``, ``place 0`` / ``new`` / ``bank`` (The Court), ``attack Q 2 1 K court``
  (Court Wars: court, spend, target, target court, remove). Cards as ``TH``, ``10h`` or ``Q♠``.

A well-formed action that is not legal now is still sent: the rules service answers why not
(FAILED_PRECONDITION with the reason), and the client shows that reason. Nothing here decides
legality; the server does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .render import DEFAULT_TYPE, FIELD_ORDER, norm_card, short_form

COMMANDS = {
    "h": "help",
    "help": "help",
    "?": "help",
    "hint": "hint",
    "t": "table",
    "table": "table",
    "q": "quit",
    "quit": "quit",
    "exit": "quit",
    "leave": "quit",
}
ALIASES = {
    "new": "new_tower",
    "newtower": "new_tower",
    "setup": "setup_place",
    "skip": "skip_attack",
    "attack_skip": "skip_attack",
}
INT_FIELDS = {"target", "tower", "spend"}
CARD_FIELDS = {"card"}
COURT_FIELDS = {"court", "target_court"}


@dataclass(frozen=True)
class Parsed:
    kind: str  # "pick" | "action" | "command" | "error" | "empty"
    index: int = -1
    action: Mapping[str, Any] | None = None
    command: str = ""
    message: str = ""


def _tokens_key(game: str, tokens: Sequence[str]) -> tuple[str, ...]:
    return tuple(norm_card(t) if len(t) <= 3 else t.lower() for t in tokens)


def parse(game: str, text: str, legal: Sequence[Mapping[str, Any]]) -> Parsed:
    text = text.strip()
    if not text:
        return Parsed("empty")
    low = text.lower()
    if low in COMMANDS:
        return Parsed("command", command=COMMANDS[low])
    if text.isdigit():
        n = int(text)
        if not legal:
            return Parsed("error", message="it is not your turn: nothing to choose from now")
        if not 1 <= n <= len(legal):
            return Parsed("error", message=f"choose a number from 1 to {len(legal)}")
        return Parsed("pick", index=n - 1)
    if text.startswith("{"):
        try:
            d = json.loads(text)
        except ValueError as exc:
            return Parsed("error", message=f"that is not valid JSON: {exc}")
        if not isinstance(d, dict):
            return Parsed("error", message='an action in JSON is an object with a "type"')
        if "type" not in d:
            kinds = sorted({str(a.get("type")) for a in legal} or FIELD_ORDER.get(game, {}))
            example = json.dumps({"type": kinds[0], **d}) if kinds else ""
            return Parsed(
                "error",
                message=f'an action in JSON needs a "type" ({" or ".join(repr(k) for k in kinds)} here)'
                + (f", e.g. {example}" if example else ""),
            )
        return Parsed("action", action=d)
    tokens = text.replace(",", " ").split()
    if game == "hearts" and len(tokens) == 2 and tokens[0].lower() == "pass":
        tokens = ["pass_card", tokens[1]]  # one card of the three, as the list offers them
    # exactly what the list shows, in any letter case
    key = _tokens_key(game, tokens)
    for i, a in enumerate(legal):
        forms = {
            _tokens_key(game, short_form(game, a).split()),
            _tokens_key(game, [str(a.get("type", "")), *short_form(game, a).split()]),
        }
        if key in forms:
            return Parsed("pick", index=i)
    return _build(game, tokens, legal)


def _build(game: str, tokens: list[str], legal: Sequence[Mapping[str, Any]]) -> Parsed:
    kinds = FIELD_ORDER.get(game, {})
    first = tokens[0].lower()
    first = ALIASES.get(first, first)
    if first in kinds:
        kind, rest = first, tokens[1:]
    else:
        legal_kinds = {a.get("type") for a in legal}
        if game == "hearts" and legal_kinds == {"pass_card"}:
            kind = "pass_card"
        elif len(legal_kinds) == 1:
            kind = next(iter(legal_kinds)) or ""
        else:
            kind = DEFAULT_TYPE.get(game, "")
        rest = tokens
        if kind not in kinds:
            return Parsed(
                "error",
                message=f"{tokens[0]!r} is not an action here; type a number from the list, or h for help",
            )
    fields = kinds[kind]
    example = {"queens_court": "5H 1 left", "hearts": "2C"}.get(game, "")
    d: dict[str, Any] = {"type": kind}
    if fields == ("cards",):
        d["cards"] = [norm_card(t) for t in rest]
        return Parsed("action", action=d)
    if len(rest) != len(fields):
        need = " ".join(fields) if fields else "nothing more"
        hint = f" (e.g. {example})" if example and kind == DEFAULT_TYPE.get(game) else ""
        return Parsed("error", message=f"{kind} takes: {need}{hint}")
    for name, tok in zip(fields, rest, strict=True):
        try:
            d[name] = _value(name, tok)
        except ValueError as exc:
            return Parsed("error", message=str(exc))
    return Parsed("action", action=d)


def _value(name: str, tok: str) -> Any:
    low = tok.lower()
    if name in INT_FIELDS:
        if not low.lstrip("-").isdigit():
            raise ValueError(f"{name} must be a number, got {tok!r}")
        return int(low)
    if name == "pile":
        if low in ("l", "left"):
            return "left"
        if low in ("r", "right"):
            return "right"
        raise ValueError(f"pile must be left or right, got {tok!r}")
    if name == "source":
        if low in ("deck", "pile"):
            return low
        raise ValueError(f"source must be deck or pile, got {tok!r}")
    if name == "agree":
        if low in ("y", "yes", "true", "agree"):
            return True
        if low in ("n", "no", "false"):
            return False
        raise ValueError(f"answer yes or no, got {tok!r}")
    if name == "remove":
        if low == "court":
            return "court"
        if low.isdigit():
            return int(low)
        raise ValueError(f'remove is a number of guards or "court", got {tok!r}')
    if name in CARD_FIELDS:
        return norm_card(tok)
    if name in COURT_FIELDS:
        return tok.upper()
    return tok


HELP = {
    "queens_court": "Play a card onto any open pile: CARD SEAT PILE, e.g. `5H 1 left` (GL is the glove).",
    "hearts": "Type a card to play it, e.g. `2C`; while passing, pick three cards one at a time, or `pass QS AH KH`.",
    "the_court": "`place N` puts the drawn card on tower N; also `new`, `bank`, `discard`, `offer`, `accept`, "
    "`decline`, `swap yes|no`, `burn`, `keep`, `draw deck|pile`.",
    "court_wars": "`defend`, `place J|Q|K`, `revive J|Q|K`, `discard`, `attack COURT SPEND TARGET TARGET_COURT "
    "REMOVE|court`, `skip`, `pass`; in setup `setup J|Q|K` or `setup_discard`.",
}
