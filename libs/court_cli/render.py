"""What the terminal shows: tables of the four games, events and actions in words, results.

Everything here works from what a client receives over gRPC: a ``GameView`` envelope (``to_act``,
``seats``, ``your_seat``, ``finished``, ``result``) and the engine's view inside it (a dict, its
shape per game in docs/rules/), plus the events of each move as the viewer may see them. Nothing
here knows more than the viewer does.

``fancy=True`` (a terminal) draws suit symbols and colours; ``fancy=False`` (a pipe, a log, CI)
writes the canonical card forms of docs/rules/README.md (``TH``, ``QS``) in plain text.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from .catalog import GAME_TITLES

SUIT_SYMBOLS = {"H": "♥", "D": "♦", "S": "♠", "C": "♣"}
SUIT_ORDER = "CDHS"
BOT_NAMES = ("Blue Otter", "Yellow Bird", "Red Fox", "Green Newt", "Grey Heron", "Pink Crab")
BOT_PREFIX = "bot:"


# ---------------------------------------------------------------------------- names


@dataclass
class Names:
    """Display names of a game's seats, and which one is the viewer's."""

    seats: list[str]  # player ids (``bot:<level>`` for bots)
    names: list[str]  # short names ("Blue Otter")
    you: int | None = None
    ids: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # "bot, heuristic" per seat, "" for people

    def __call__(self, seat: Any) -> str:
        """The full name: ``Blue Otter (bot, heuristic)``, ``Alice (you)``."""
        if not isinstance(seat, int) or not 0 <= seat < len(self.names):
            return f"seat {seat}"
        note = "you" if seat == self.you else (self.notes[seat] if seat < len(self.notes) else "")
        return self.names[seat] + (f" ({note})" if note else "")

    def short(self, seat: Any) -> str:
        if not isinstance(seat, int) or not 0 <= seat < len(self.names):
            return f"seat {seat}"
        return "you" if seat == self.you else self.names[seat]

    def verb(self, seat: Any, plain: str, third: str) -> str:
        """``you lead`` / ``Blue Otter leads``: the seat's short name and the verb agreeing with it."""
        return f"you {plain}" if seat == self.you else f"{self.short(seat)} {third}"

    def possessive(self, seat: Any, actor: Any = None) -> str:
        if seat == actor:
            return "your own" if seat == self.you else "their own"
        return "your" if seat == self.you else f"{self.short(seat)}'s"

    @classmethod
    def build(cls, seats: Sequence[str], accounts: Mapping[str, str], you: int | None = None) -> Names:
        names: list[str] = []
        notes: list[str] = []
        bots = 0
        for pid in seats:
            if pid.startswith(BOT_PREFIX):
                level = pid[len(BOT_PREFIX) :].split(":")[0]
                names.append(BOT_NAMES[bots % len(BOT_NAMES)])
                notes.append(f"bot, {level}")
                bots += 1
            else:
                names.append(accounts.get(pid, pid[:8]))
                notes.append("")
        return cls(list(seats), names, you, dict(accounts), notes)


# ---------------------------------------------------------------------------- cards


def norm_card(token: str) -> str:
    """What a person types to the canonical form (docs/rules/README.md): ``10h`` -> ``TH``, ``qs`` -> ``QS``, ``gl`` -> ``GL``."""
    t = token.strip().upper()
    if t.startswith("10"):
        t = "T" + t[2:]
    for sym, suit in (("♥", "H"), ("♦", "D"), ("♠", "S"), ("♣", "C")):
        t = t.replace(sym, suit)
    return t


def card_text(card: str | None, fancy: bool = True) -> Text:
    if card is None:
        return Text("--", style="dim")
    if not fancy:
        return Text(card)
    if card == "GL":
        return Text("[glove]", style="bold yellow")
    if card in ("RJ", "BJ"):
        return Text("Joker" + ("♥" if card == "RJ" else "♠"), style="bold magenta")
    if len(card) == 2 and card[1] in SUIT_SYMBOLS:
        rank = "10" if card[0] == "T" else card[0]
        style = "bold red" if card[1] in "HD" else "bold bright_white"
        return Text(rank + SUIT_SYMBOLS[card[1]], style=style)
    return Text(card)


def cards_text(cards: Sequence[str] | None, fancy: bool = True, sep: str = " ") -> Text:
    out = Text()
    for i, c in enumerate(cards or ()):
        if i:
            out.append(sep)
        out.append_text(card_text(c, fancy))
    return out


def card_word(card: str | None, fancy: bool = False) -> str:
    return card_text(card, fancy).plain


def hand_by_suit(cards: Sequence[str], fancy: bool = True) -> Text:
    """A hand grouped by suit (C D H S), ranks low to high within a suit as dealt in views."""
    out = Text()
    groups: dict[str, list[str]] = {}
    for c in cards:
        groups.setdefault(c[1] if len(c) == 2 else "?", []).append(c)
    first = True
    for suit in (*SUIT_ORDER, "?"):
        if suit not in groups:
            continue
        if not first:
            out.append("  ")
        first = False
        out.append_text(cards_text(groups[suit], fancy))
    return out


# ---------------------------------------------------------------------------- actions


# The fields of each action type in the order a person types them (``5H 1 left``, ``attack Q 2 1 K 1``).
FIELD_ORDER: dict[str, dict[str, tuple[str, ...]]] = {
    "queens_court": {"play": ("card", "target", "pile")},
    "hearts": {"play": ("card",), "pass_card": ("card",), "pass": ("cards",)},
    "the_court": {
        "place": ("tower",),
        "new_tower": (),
        "bank": (),
        "discard": (),
        "offer": (),
        "accept": (),
        "decline": (),
        "swap": ("agree",),
        "burn": (),
        "keep": (),
        "draw": ("source",),
    },
    "court_wars": {
        "setup_place": ("court",),
        "setup_discard": (),
        "defend": (),
        "place": ("court",),
        "revive": ("court",),
        "discard": (),
        "attack": ("court", "spend", "target", "target_court", "remove"),
        "skip_attack": (),
        "pass": (),
    },
}
# Types a person may leave out when typing (the game's everyday action).
DEFAULT_TYPE = {"queens_court": "play", "hearts": "play"}


def short_form(game: str, a: Mapping[str, Any]) -> str:
    """The typed form of an action: its type (left out for a game's everyday action) and fields in order."""
    kind = a.get("type", "")
    order = FIELD_ORDER.get(game, {}).get(kind, tuple(k for k in a if k not in ("type", "player")))
    parts: list[str] = []
    if DEFAULT_TYPE.get(game) != kind and not (game == "hearts" and kind == "pass_card"):
        parts.append(kind)
    for k in order:
        v = a.get(k)
        if v is None:
            continue
        if isinstance(v, bool):
            parts.append("yes" if v else "no")
        elif isinstance(v, list):
            parts.extend(str(x) for x in v)
        else:
            parts.append(str(v))
    return " ".join(parts)


def describe_action(
    game: str, a: Mapping[str, Any], names: Names, view: Mapping[str, Any] | None = None, fancy: bool = False
) -> str:
    """An action in words, from the acting seat's point of view."""
    kind = a.get("type")
    view = view or {}
    if game == "queens_court" and kind == "play":
        what = "the glove" if a.get("card") == "GL" else card_word(a.get("card"), fancy)
        return f"{what} on {names.possessive(a.get('target'))} {a.get('pile')} pile"
    if game == "hearts":
        if kind == "play":
            return f"play {card_word(a.get('card'), fancy)}"
        if kind == "pass_card":
            return f"pass {card_word(a.get('card'), fancy)}"
        if kind == "pass":
            return "pass " + " ".join(card_word(c, fancy) for c in a.get("cards", []))
    if game == "the_court":
        if kind == "place":
            i = a.get("tower", 0)
            seat = view.get("seat")
            towers: list[Any] = []
            for p in view.get("players") or ():
                if p.get("seat") == seat:
                    towers = p.get("towers") or []
            if isinstance(i, int) and 0 <= i < len(towers):
                t = towers[i]
                top = (t.get("cards") or ["?"])[-1]
                return f"place on tower {i} (top {card_word(top, fancy)}, value {t.get('value')})"
            return f"place on tower {i}"
        words = {
            "new_tower": "start a new tower",
            "bank": "bank it in the Moat",
            "discard": "discard it",
            "offer": "offer it to your partner",
            "accept": "accept the offered card",
            "decline": "decline the offered card",
            "burn": "burn it",
            "keep": "keep it",
        }
        if kind in words:
            return words[kind]
        if kind == "swap":
            return "vote to swap" if a.get("agree") else "vote against swapping"
        if kind == "draw":
            return f"draw from the {a.get('source')}"
    if game == "court_wars":
        if kind in ("setup_place", "place"):
            return f"place the guard on your {a.get('court')} court"
        if kind == "revive":
            return f"revive your {a.get('court')} court with the joker"
        if kind == "attack":
            remove = a.get("remove")
            hit = "defeat it" if remove == "court" else f"remove {remove} guard{'s' if remove != 1 else ''}"
            spend = a.get("spend")
            return (
                f"attack with {spend} guard{'s' if spend != 1 else ''} of your {a.get('court')}: "
                f"{names.possessive(a.get('target'))} {a.get('target_court')}, {hit}"
            )
        words = {
            "setup_discard": "discard it",
            "defend": "defend (draw a card)",
            "discard": "discard it",
            "skip_attack": "skip the attack",
            "pass": "pass",
        }
        if kind in words:
            return words[kind]
    return short_form(game, a)


# ---------------------------------------------------------------------------- events


def _seat_of(e: Mapping[str, Any]) -> Any:
    return e.get("player", e.get("seat"))


def describe_event(game: str, e: Mapping[str, Any], names: Names, fancy: bool = False) -> str | None:
    """One event in words; ``None`` for bookkeeping events not worth a line."""
    t = e.get("type", "?")
    who = names.short(_seat_of(e))

    def c(card: str | None) -> str:
        return card_word(card, fancy)

    if t in (
        "TurnStarted",
        "GameCreated",
        "ActionApplied",
        "HandDealt",
        "PassCardsChosen",
        "SwapVoted",
        "TurnEnded",
        "Defended",
    ):
        return None
    if t == "TurnTimedOut":
        return (
            f"{names.possessive(e.get('seat'))} time ran out: the bot plays for {names.short(e.get('seat'))}"
        )
    if t == "SeatAway":
        return f"{names.short(e.get('seat'))} {_is(e.get('seat'), names)} away: the bot plays the seat"
    if t == "SeatReturned":
        return f"{names.short(e.get('seat'))} {_is(e.get('seat'), names)} back at the table"
    if t == "GameStarted":
        return f"{GAME_TITLES.get(game, game)} begins: {', '.join(names(i) for i in range(len(names.names)))}"
    if game == "queens_court":
        if t == "RoundDealt":
            return f"Round {e.get('round', 0) + 1} dealt; {names.verb(e.get('starter'), 'start', 'starts')}"
        if t == "CardPlayed":
            what = "the glove" if e.get("glove") else c(e.get("card"))
            sb, sa = e.get("spread_before"), e.get("spread_after")
            owner = names.possessive(e.get("target"))
            spread = (
                f" ({owner} spread {'QQ' if sb is None else sb} → {'QQ' if sa is None else sa})"
                if sb != sa and "spread_after" in e
                else ""
            )
            return (
                f"{who} played {what} on {names.possessive(e.get('target'), e.get('player'))} {e.get('pile')} "
                f"pile{spread}"
            )
        if t == "CardsDrawn":
            n = e.get("count", 0)
            return f"{who} drew {n} card{'s' if n != 1 else ''} ({e.get('deck_size')} left in the deck)"
        if t == "SecondHalfStarted":
            return f"The deck is empty: second half, gloves dealt; {names.verb(e.get('next_player'), 'play', 'plays')} next"
        if t == "PileLocked":
            sp = e.get("spread")
            return (
                f"{who} played out; {'your' if e.get('player') == names.you else 'their'} piles are locked "
                f"(spread {'QQ' if sp is None else sp})"
            )
        if t == "RoundEnded":
            winners = ", ".join(names.short(w) for w in e.get("winners", [])) or "nobody"
            spreads = ", ".join(
                f"{names.short(i)} {s if s is not None else 'QQ'}" for i, s in enumerate(e.get("spreads", []))
            )
            return f"Round {e.get('round', 0) + 1} over: won by {winners} (spreads: {spreads}){_tie_break(e, names)}"
        if t == "GameEnded":
            wins = max(e.get("round_wins") or [0])
            return f"Game over: {names.verb(e.get('winner'), 'win', 'wins')} with {wins} round win{'s' if wins != 1 else ''}"
    if game == "hearts":
        if t == "CardPlayed":
            return f"{who} played {c(e.get('card'))}"
        if t == "CardsPassed":
            return f"{who} passed three cards {e.get('direction')} to {names.short(e.get('to'))}"
        if t == "PlayStarted":
            leads = names.verb(e.get("seat"), "lead", "leads")
            # every fourth hand is played without passing (docs/rules/hearts.md: left, across, right, none)
            done = "No passing this hand" if int(e.get("hand") or 0) % 4 == 3 else "Passing done"
            return f"{done}; {leads} the 2♣" if fancy else f"{done}; {leads} 2C"
        if t == "TrickTaken":
            pts = e.get("points", 0)
            return f"{who} took the trick {' '.join(c(x) for x in e.get('cards', []))}" + (
                f" (+{pts} point{'s' if pts != 1 else ''})" if pts else ""
            )
        if t == "HeartsBroken":
            return "Hearts are broken"
        if t == "HandEnded":
            pts = ", ".join(f"{names.short(i)} +{p}" for i, p in enumerate(e.get("points", [])))
            moon = f" — {names.short(e.get('moon'))} shot the moon!" if e.get("moon") is not None else ""
            tot = ", ".join(f"{names.short(i)} {p}" for i, p in enumerate(e.get("totals", [])))
            return f"Hand {e.get('hand', 0) + 1} over: {pts}{moon}. Totals: {tot}"
        if t == "GameEnded":
            ws = e.get("winners", [])
            winners = (
                names.verb(ws[0], "win", "wins")
                if len(ws) == 1
                else ", ".join(names.short(w) for w in ws) + " win"
            )
            return f"Game over after {e.get('hands')} hands: {winners}"
    if game == "the_court":
        if t == "CardDrawn":
            card = e.get("card")
            return f"{who} drew {c(card) if card else 'a card'}" + (
                f" from the {e['source']}" if e.get("source") else ""
            )
        if t == "TowerStarted":
            return f"{who} started tower {e.get('tower')} with {c(e.get('card'))}"
        if t == "CardPlaced":
            return f"{who} placed {c(e.get('card'))} on tower {e.get('tower')} (value {e.get('value')})" + (
                ", frozen" if e.get("frozen") else ""
            )
        if t == "TowerClosed":
            return f"{who} closed tower {e.get('tower')} with {c(e.get('card'))}: {e.get('points'):+d} (score {e.get('score')})"
        if t == "TowerSwept":
            return f"{who} swept tower {e.get('tower')} with {c(e.get('card'))}: {e.get('points'):+d} (score {e.get('score')})"
        if t == "MoatBanked":
            return f"{who} banked a card in the Moat ({e.get('moat_size')} there)"
        if t == "MoatDeployed":
            return f"{_cap(names.possessive(_seat_of(e)))} Moat deployed {c(e.get('card'))} as tower {e.get('tower')}"
        if t == "MoatSealed":
            return f"{_cap(names.possessive(_seat_of(e)))} Moat is sealed"
        if t == "CardDiscarded":
            return f"{who} discarded {c(e.get('card'))}" + (" to the pile" if e.get("to") == "pile" else "")
        if t == "CardOffered":
            return f"{who} offered the card to {names.short(e.get('to'))}" + (
                " (no place for it)" if e.get("automatic") else ""
            )
        if t == "CardAccepted":
            return f"{who} accepted the card"
        if t == "CardDeclined":
            return f"{who} declined the card"
        if t == "CardKept":
            return f"{who} kept the card"
        if t == "CardBurned":
            return f"{who} burned {c(e.get('card'))}"
        if t == "CardShown":
            return None
        if t == "CardsSwapped":
            return "Both agreed: the cards swap"
        if t == "SwapVetoed":
            return "No swap"
        if t == "CardHandedOff":
            to = e.get("to")
            then = (
                "you place it and skip a turn"
                if to == names.you
                else f"{names.short(to)} places it and skips a turn"
            )
            return f"{who} drew {c(e.get('card'))}: it goes to {names.short(to)}; {then}"
        if t == "TurnSkipped":
            return f"{names.verb(_seat_of(e), 'skip', 'skips')} a turn"
        if t == "PlayerFinished":
            return f"{who} finished ({e.get('reason', '').replace('_', ' ')}): score {e.get('score')}"
        if t == "GameEnded":
            won = e.get("won")
            verdict = "" if won is None else (" — target beaten!" if won else " — target missed")
            return f"Game over: scores {', '.join(f'{names.short(i)} {s}' for i, s in enumerate(e.get('scores', [])))}{verdict}"
    if game == "court_wars":
        if t == "SetupCardDrawn":
            return f"{who} drew {c(e.get('card'))} in setup"
        if t == "GuardPlaced":
            return f"{who} placed {c(e.get('card'))} on the {e.get('court')} court (attack {e.get('attack')}, defence {e.get('defence')})"
        if t == "CardDiscarded":
            return f"{who} discarded {' '.join(c(x) for x in e.get('cards', []))}"
        if t == "SetupEnded":
            return "Setup done: the war begins"
        if t == "CardDrawn":
            return f"{who} drew {c(e.get('card'))}" + (" (the Ace's draw again)" if e.get("ace_draw") else "")
        if t == "CourtAttacked":
            out = (
                f"{who} attacked {names.possessive(e.get('target'))} {e.get('target_court')} with strength "
                f"{e.get('strength')} from the {e.get('court')}"
            )
            if e.get("defeated"):
                return out + ": defeated!"
            removed = e.get("removed") or []
            return out + (f", removing {' '.join(c(x) for x in removed)}" if removed else "")
        if t == "AttackSkipped":
            return f"{who} skipped the attack"
        if t == "DiscardPileTurned":
            return f"The discard pile is turned over ({e.get('size')} cards)"
        if t == "CourtDefeated":
            return None  # CourtAttacked already said so
        if t == "CourtRevived":
            return f"{who} revived the {e.get('court')} court with a joker"
        if t == "PlayerOut":
            return f"{names.verb(_seat_of(e), 'are', 'is')} out"
        if t == "TurnPassed":
            return f"{who} passed"
        if t == "DrawAgainEnded":
            return None
        if t == "GameEnded":
            won = e.get("winners") or []
            return f"Game over after {e.get('turns')} turns: {', '.join(names.short(w) for w in won) or 'nobody'} won"
    fields = ", ".join(f"{k}={v}" for k, v in e.items() if k != "type")
    return f"{t}: {fields}" if fields else t


# ---------------------------------------------------------------------------- tables


def _turn_marker(seat: int, to_act: Sequence[int]) -> str:
    return "▶" if seat in to_act else ""


def _table(fancy: bool, title: str | None = None) -> Table:
    return Table(
        title=title,
        box=box.SIMPLE_HEAVY if fancy else box.ASCII,
        title_justify="left",
        show_edge=False,
        pad_edge=False,
    )


def render_queens_court(
    v: Mapping[str, Any], to_act: Sequence[int], names: Names, fancy: bool
) -> RenderableType:
    t = _table(fancy)
    for col in ("turn", "seat", "player", "left", "right", "spread", "piles", "hand", "rounds", "notes"):
        t.add_column(col)
    wins = v.get("round_wins") or []
    for row in v.get("table", []):
        seat = row.get("seat")
        piles = []
        for side in ("left", "right"):
            p = row.get(side) or {}
            txt = Text()
            if p.get("gloved"):
                txt.append("[GL] " if not fancy else "🧤 ", style="yellow")
            txt.append_text(card_text(p.get("showing"), fancy))
            txt.append(f" ({p.get('count', 0)})", style="dim")
            piles.append(txt)
        spread = "QQ" if row.get("double_queen") else str(row.get("spread"))
        flags = []
        if row.get("locked"):
            flags.append("locked")
        if row.get("holds_glove"):
            flags.append("glove in hand")
        style = "bold" if seat == names.you else ""
        t.add_row(
            _turn_marker(seat, to_act),
            str(seat),
            Text(names(seat), style=style),
            piles[0],
            piles[1],
            Text(spread, style="green" if spread == "0" else ""),
            str(row.get("pile_count", "")),
            str(row.get("hand_size", "")),
            str(wins[seat]) if seat < len(wins) else "",
            ", ".join(flags),
        )
    phase = {"first_half": "first half", "second_half": "second half (gloves)", "over": "over"}.get(
        v.get("phase", ""), str(v.get("phase", ""))
    )
    head = Text(
        f"Queen's Court · round {v.get('round', 0) + 1} · {phase} · deck {v.get('deck_size', 0)}",
        style="bold",
    )
    parts: list[RenderableType] = [head, t]
    if v.get("hand") is not None:
        parts.append(Text.assemble(("Your hand: ", "bold"), cards_text(v.get("hand") or [], fancy)))
    return Group(*parts)


def render_hearts(v: Mapping[str, Any], to_act: Sequence[int], names: Names, fancy: bool) -> RenderableType:
    t = _table(fancy)
    for col in ("turn", "seat", "player", "cards", "tricks", "this hand", "total"):
        t.add_column(col)
    sizes, won, taken, totals = (v.get(k) or [] for k in ("hand_sizes", "tricks_won", "taken", "totals"))
    for seat in range(len(totals)):
        t.add_row(
            _turn_marker(seat, to_act),
            str(seat),
            Text(names(seat), style="bold" if seat == names.you else ""),
            str(sizes[seat]) if seat < len(sizes) else "",
            str(won[seat]) if seat < len(won) else "",
            str(taken[seat]) if seat < len(taken) else "",
            str(totals[seat]),
        )
    phase = v.get("phase", "")
    status = f"passing {v.get('pass')}" if phase == "pass" else ("play" if phase == "play" else str(phase))
    broken = " · hearts broken" if v.get("hearts_broken") else ""
    parts: list[RenderableType] = [
        Text(
            f"Hearts · hand {v.get('hand', 0) + 1} · {status}{broken} · game to {v.get('limit', 100)}",
            style="bold",
        ),
        t,
    ]
    trick = v.get("trick")
    if trick and trick.get("cards"):
        line = Text("Trick: ", style="bold")
        leader = trick.get("leader", 0)
        for i, card in enumerate(trick["cards"]):
            if i:
                line.append("  ")
            line.append(f"{names.short((leader + i) % 4)} ")
            line.append_text(card_text(card, fancy))
        parts.append(line)
    elif v.get("tricks"):
        last = v["tricks"][-1]
        parts.append(
            Text.assemble(
                ("Last trick: ", "bold"),
                cards_text(last.get("cards", []), fancy),
                f" → {names.short(last.get('winner'))}",
            )
        )
    if v.get("cards") is not None:
        parts.append(Text.assemble(("Your hand: ", "bold"), hand_by_suit(v.get("cards") or [], fancy)))
    if v.get("chosen"):
        parts.append(Text.assemble(("Chosen to pass: ", "bold"), cards_text(v["chosen"], fancy)))
    if v.get("received"):
        r = v["received"]
        parts.append(
            Text.assemble(
                ("Received: ", "dim"),
                cards_text(r.get("cards", []), fancy),
                (f" from {names.short(r.get('from'))}", "dim"),
            )
        )
    return Group(*parts)


def render_the_court(
    v: Mapping[str, Any], to_act: Sequence[int], names: Names, fancy: bool
) -> RenderableType:
    mode = v.get("mode", "solitaire")
    target = v.get("target")
    head = Text(
        f"The Court · {mode.replace('_', ' ')}"
        + (f" · target {target}" if target else "")
        + (f" · deck {v['deck_size']}" if "deck_size" in v and v.get("deck_size") is not None else ""),
        style="bold",
    )
    parts: list[RenderableType] = [head]
    for p in v.get("players", []):
        seat = p.get("seat")
        line = Text(
            f"{_turn_marker(seat, to_act) or ' '} {names(seat)} ({p.get('colour')}): score {p.get('score')}",
            style="bold" if seat == names.you else "",
        )
        if "deck_size" in p:
            line.append(f" · deck {p.get('deck_size')}", style="dim")
        moat = p.get("moat")
        if moat:
            line.append(" · Moat ")
            if moat.get("cards"):
                line.append_text(cards_text(moat["cards"], fancy))
            else:
                line.append(f"{moat.get('count', 0)} card(s)")
            if moat.get("sealed"):
                line.append(" (sealed)", style="dim")
        if p.get("finished"):
            line.append(" · finished", style="green")
        parts.append(line)
        towers = p.get("towers") or []
        if towers:
            for i, tw in enumerate(towers):
                row = Text(f"    tower {i}: ")
                row.append_text(cards_text(tw.get("cards", []), fancy))
                row.append(f"  = {tw.get('value')}", style="dim")
                if tw.get("frozen"):
                    row.append("  frozen", style="cyan")
                parts.append(row)
        else:
            parts.append(Text("    no open towers", style="dim"))
    pending = v.get("pending") or []
    for pend in pending:
        parts.append(
            Text.assemble(
                ("To place: ", "bold"),
                card_text(pend.get("card"), fancy),
                f" (held by {names.short(pend.get('holder'))})",
            )
        )
    if v.get("pile_top"):
        parts.append(Text.assemble(("Communal pile top: ", "bold"), card_text(v.get("pile_top"), fancy)))
    return Group(*parts)


def render_court_wars(
    v: Mapping[str, Any], to_act: Sequence[int], names: Names, fancy: bool
) -> RenderableType:
    phase = {
        "setup": "setup · ",
        "place": "placing a guard · ",
        "ace": "after an Ace · ",
        "joker": "a joker drawn · ",
    }.get(str(v.get("phase")), "")
    head = Text(
        f"Court Wars · {phase}turn {v.get('turns', 0)}/{v.get('turn_limit')} · draw pile "
        f"{v.get('draw_size')} · discard {v.get('discard_size')}",
        style="bold",
    )
    parts: list[RenderableType] = [head]
    t = _table(fancy)
    for col in ("turn", "player", "J", "Q", "K", "standing"):
        t.add_column(col)
    for p in v.get("players", []):
        seat = p.get("seat")
        cells = []
        for court in p.get("courts", []):
            cell = Text()
            if not court.get("standing"):
                cell.append("defeated", style="dim strike")
            else:
                cell.append_text(card_text(court.get("joker") or court.get("card"), fancy))
                if court.get("guards"):
                    cell.append(" ")
                    cell.append_text(cards_text(court["guards"], fancy))
                cell.append(f" a{court.get('attack')}/d{court.get('defence')}", style="dim")
            cells.append(cell)
        while len(cells) < 3:
            cells.append(Text(""))
        t.add_row(
            _turn_marker(seat, to_act),
            Text(names(seat), style="bold" if seat == names.you else ""),
            *cells,
            "out" if p.get("out") else str(p.get("standing")),
        )
    parts.append(t)
    if v.get("pending"):
        parts.append(Text.assemble(("Drawn: ", "bold"), card_text(v["pending"], fancy)))
    if v.get("discard_top"):
        parts.append(Text.assemble(("Discard top: ", "dim"), card_text(v["discard_top"], fancy)))
    return Group(*parts)


RENDERERS = {
    "queens_court": render_queens_court,
    "hearts": render_hearts,
    "the_court": render_the_court,
    "court_wars": render_court_wars,
}


def _is(seat: Any, names: Names) -> str:
    return "are" if seat == names.you else "is"


def _tie_break(e: Mapping[str, Any], names: Names) -> str:
    """How a Queen's Court round tied on the lowest spread was decided (docs/rules/queens_court.md: fewest cards in the
    two piles, gloves not counted; still tied, every tied player wins): "" when no tie decided it."""
    spreads = e.get("spreads") or []
    counts = e.get("pile_counts") or []
    scored = [s for s in spreads if s is not None]
    if not scored or len(counts) != len(spreads):
        return ""
    tied = [i for i, s in enumerate(spreads) if s == min(scored)]
    if len(tied) < 2:
        return ""
    cards = ", ".join(f"{names.short(i)} {counts[i]}" for i in tied)
    if len(e.get("winners") or []) < len(tied):
        return f"; a tie on spread {min(scored)}, won on the tie-break: fewest cards in the piles ({cards})"
    return f"; a tie on spread {min(scored)} and on cards in the piles ({cards}): every tied player wins"


def clock_line(view: Any, names: Names, now_ms: int | None = None) -> str | None:
    """The turn clock in words (docs/clock.md), from a ``GameView``'s ``seat_clocks``: each acting
    seat's time left (its deadline, server time, minus ``now_ms``, this machine's clock by default;
    never below 0) and who is away; ``None`` for a game without a clock and nobody away."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    parts = []
    for c in view.seat_clocks:
        if c.seat in view.to_act and c.HasField("deadline") and not view.finished:
            left = max(0, (c.deadline.ToMilliseconds() - now_ms + 999) // 1000)
            bank = f" (of it {c.bank_ms // 1000} s bank)" if c.bank_ms else ""
            parts.append(f"⏱ {names.short(c.seat)}: {left} s left{bank}")
    away = [names.short(c.seat) for c in view.seat_clocks if c.away]
    if away:
        parts.append("away (the bot plays): " + ", ".join(away))
    return " · ".join(parts) or None


def render_view(
    game: str, v: Mapping[str, Any], to_act: Sequence[int], names: Names, fancy: bool = True
) -> RenderableType:
    return RENDERERS[game](v, to_act, names, fancy)


def result_line(game: str, result: Mapping[str, Any], winners: Sequence[int], names: Names) -> str:
    """The final result in one line."""
    won = ", ".join(names.short(w) for w in winners) or "nobody"
    if game == "queens_court":
        wins = ", ".join(f"{names.short(i)} {w}" for i, w in enumerate(result.get("round_wins", [])))
        return f"Winner: {won} (round wins: {wins})"
    if game == "hearts":
        tot = ", ".join(f"{names.short(i)} {p}" for i, p in enumerate(result.get("totals", [])))
        return f"Winner: {won} (totals: {tot})"
    if game == "the_court":
        scores = ", ".join(f"{names.short(i)} {s}" for i, s in enumerate(result.get("scores", [])))
        verdict = {True: "won", False: "lost", None: ""}.get(result.get("won"), "")
        target = f" against a target of {result.get('target')}" if result.get("target") else ""
        return f"Scores: {scores}{target}" + (f": {verdict}" if verdict else f"; winner: {won}")
    if game == "court_wars":
        return f"Winner: {won} after {result.get('turns')} turns"
    return f"Winner: {won}"


def _cap(words: str) -> str:
    return words[:1].upper() + words[1:]
