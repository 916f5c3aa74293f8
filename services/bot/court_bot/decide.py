"""Deciding one move from one seat's view: levels, adapters, budgets, metrics.

``Decider.decide`` is the one place a move is chosen, for turns and for ``Suggest`` alike:

* ``heuristic`` and ``expert`` need the game's adapter (``court_bots.games.<game>``) and run
  ``court_bots.choose`` on the view alone. Without an adapter they raise ``NoAdapter`` (never a
  silent stand-in).
* ``random`` picks uniformly from the seat's legal actions as the rules service lists them in the
  view, so it plays every game, with or without an adapter. ``court_bots.choose``'s random level
  draws from the same set (a seat's legal moves follow from what it sees), after sampling the
  hidden cards for nothing: that sampling was most of the bot's deciding time in make bench
  ONLY=stack (0.35 ms a Hearts move).
* ``heuristic`` in a game whose heuristic reads the view alone (Hearts, Queen's Court, Court
  Wars: ``HEURISTIC_READS_SAMPLE = False``) gets that same legal list as engine actions
  (``_engine_actions``) and samples no hidden cards either: the sampling was about 4 % of the
  bot's busy time in make bench ONLY=stack (py-spy). Queen's Court's heuristic draws from the
  position's rng what the sampling used to draw first, so its moves differ from
  ``court_bots.choose`` without the list (``tests/bots/decisions.json`` records that path, unchanged).
* The move is checked against those legal actions before anyone submits it. An adapter that
  proposes an illegal move is a bug: it is logged as an error and counted
  (``court_bot_errors_total{kind="illegal_decision"}``), and a uniformly random legal move is
  played instead so the table is not left waiting.

Decisions are CPU-bound: the expert's search runs on a small thread pool so the event loop (NATS
heartbeats, health checks, other games' I/O) gets the GIL between its steps; the ``random`` and
``heuristic`` levels, well under a millisecond a move, are decided on the loop itself
(``INLINE_LEVELS``: the hand-off would cost more than the move). The rng of a decision is seeded from an HMAC
(keyed with COURT_ID_SECRET, a secret of its own, never a token key) of the position, so every replica decides the same way at
the same position (a duplicate handler submits the same move under the same request id) and no
player can predict a bot's random choices.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import hmac
import importlib
import random
import time
from collections import defaultdict, deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import court_bots
import grpc
from court_bots.levels import LEVELS
from court_contract import actions as kactions
from court_contract import typed
from court_games.registry import GAME_NAMES, get_game
from court_kit import logging as klog
from court_kit.checks import quote
from court_kit.errors import InvalidArgument, ServiceError
from court_proto.court.rules.v1 import actions_pb2, rules_pb2

from .metrics import DECISION_SECONDS, DECISIONS, ERRORS

log = klog.get_logger("court_bot.decide")

STRENGTH = ("expert", "heuristic", "random")  # strongest first
RECENT = 4096  # decision times kept per (game, level) for benchmarks and tests
PARSED_KEPT = 4096  # legal actions' engine forms remembered per game (_engine_actions)
# levels decided on the event loop even with a thread pool: their moves take well under a
# millisecond (make bench ONLY=stack: heuristic 0.5-0.7 ms on average), less than the GIL's switch
# interval (5 ms), so a deciding thread would not let the loop run meanwhile anyway and only adds
# its hand-off (two thread wake-ups, the GIL passed twice); the expert's search keeps the thread
INLINE_LEVELS = frozenset({"random", "heuristic"})


class UnknownLevel(InvalidArgument):
    pass


class NoAdapter(InvalidArgument):
    """The level needs ``court_bots.games.<game>``, which this build does not have (yet)."""


class TooLate(ServiceError):
    """The caller's deadline passed before the decision could start (the deciding threads were busy)."""

    code = grpc.StatusCode.DEADLINE_EXCEEDED


MIN_BUDGET_MS = 1.0


def find_adapter(game: str) -> ModuleType | None:
    """The game's bot adapter module, or ``None`` when there is none (or it does not import)."""
    if game not in GAME_NAMES:
        return None
    try:
        mod = importlib.import_module(f"court_bots.games.{game}")
    except ModuleNotFoundError as exc:
        if exc.name == f"court_bots.games.{game}":
            return None
        log.error("bot adapter does not import", game=game, error=str(exc))
        ERRORS.labels("adapter_import").inc()
        return None
    except Exception as exc:  # noqa: BLE001 - a broken adapter must not take the service down
        log.error("bot adapter does not import", game=game, error=f"{type(exc).__name__}: {exc}")
        ERRORS.labels("adapter_import").inc()
        return None
    if not hasattr(mod, "ADAPTER") or not hasattr(mod, "heuristic"):
        log.error("bot adapter lacks ADAPTER or heuristic", game=game)
        ERRORS.labels("adapter_import").inc()
        return None
    return mod


_KEYED: dict[str, hmac.HMAC] = {}  # secret -> its HMAC-SHA256 with no message yet (position_rng)


def position_rng(secret: str, *parts: Any) -> random.Random:
    """A ``random.Random`` determined by the position (and unpredictable without the secret)."""
    key = ":".join(str(p) for p in parts).encode()
    keyed = _KEYED.get(secret)
    if keyed is None:
        keyed = _KEYED[secret] = hmac.new(secret.encode(), digestmod=hashlib.sha256)
    # a copy of the keyed state: the bytes of hmac.new(secret, key, sha256).digest(), without
    # OpenSSL looking the algorithm up again for each (a third of Suggest's time in make bench)
    mac = keyed.copy()
    mac.update(key)
    return random.Random(int.from_bytes(mac.digest()[:16], "big"))


@dataclass(frozen=True, slots=True)
class Choice:
    action: actions_pb2.Action
    level: str
    game: str
    seconds: float  # the thinking time (wall clock)
    iterations: int = 0  # searches run (expert)
    via: str = "adapter"  # "adapter" | "legal_list" | "fallback"
    cpu_seconds: float = 0.0  # CPU time of the deciding thread (wall minus waiting for a core or the GIL)

    def explain(self, seat: int, seq: int) -> str:
        what = {
            "random": "a uniformly random legal move",
            "heuristic": "the rules of thumb of a good player",
            # no search ran when the choice was forced or the level decides it by rule (a Hearts pass)
            "expert": f"information-set search ({self.iterations} iterations)"
            if self.iterations
            else "the rules of thumb of a good player (this choice needs no search)",
        }[self.level]
        if self.via == "fallback":
            what = "a random legal move (the adapter proposed an illegal one; reported)"
        return (
            f"{self.level} level, {what}, from seat {seat}'s view at move {seq}, "
            f"decided in {self.seconds * 1000:.1f} ms"
        )


class Decider:
    def __init__(
        self,
        budgets_ms: Mapping[str, float],
        *,
        threads: int = 1,
        adapters: Callable[[str], ModuleType | None] = find_adapter,
    ):
        self.budgets_ms = dict(budgets_ms)
        self._adapters = adapters
        self._adapter_cache: dict[str, ModuleType | None] = {}
        # threads=0: decide on the event loop's own thread (no GIL hand-offs, but I/O waits meanwhile)
        self._pool = (
            ThreadPoolExecutor(max_workers=threads, thread_name_prefix="court-bot-decide")
            if threads
            else None
        )
        # (wall, cpu) seconds of recent decisions per (game, level), for benchmarks and tests
        self.recent: dict[tuple[str, str], deque[tuple[float, float]]] = defaultdict(
            lambda: deque(maxlen=RECENT)
        )
        self._parsed: dict[str, dict[bytes, Any]] = defaultdict(dict)  # _engine_actions' memo
        self._series: dict[tuple[str, str, str], tuple[Any, Any]] = {}  # (game, level, purpose) -> metrics

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    def adapter(self, game: str) -> ModuleType | None:
        """The game's adapter, looked up once per process (as imports are)."""
        if game not in self._adapter_cache:
            self._adapter_cache[game] = self._adapters(game)
        return self._adapter_cache[game]

    def levels_for(self, game: str) -> tuple[str, ...]:
        """The levels this build plays ``game`` at, strongest first."""
        return STRENGTH if self.adapter(game) is not None else ("random",)

    def check_level(self, game: str, level: str) -> None:
        if level not in LEVELS:
            raise UnknownLevel(f"unknown bot level {quote(level)}; levels: {', '.join(LEVELS)}")
        if level != "random" and self.adapter(game) is None:
            raise NoAdapter(
                f"the {level} level does not play {game} in this build yet (no "
                f"court_bots.games.{game} adapter); levels available for {game}: "
                f"{', '.join(self.levels_for(game))}"
            )

    async def decide(
        self,
        game: str,
        view: Mapping[str, Any],
        seat: int,
        level: str,
        legal: Sequence[actions_pb2.Action],
        rng: random.Random,
        *,
        deadline: float | None = None,
        purpose: str = "turn",
    ) -> Choice:
        """The move ``level`` makes for ``seat`` from ``view`` (``legal``: the seat's legal actions).

        The level's budget bounds the thinking; ``deadline`` (a ``time.perf_counter()`` instant)
        shortens it when it comes sooner, counted from when a deciding thread takes the work.
        """
        self.check_level(game, level)
        if not legal:
            raise ValueError(f"seat {seat} has no legal action")
        budget = self.budgets_ms[level]
        mod = self.adapter(game)
        if mod is None or level == "random":  # the rules service's legal list (module docstring)
            t0 = time.perf_counter()
            action = legal[rng.randrange(len(legal))]
            # one draw: its wall time is its CPU time (a thread CPU clock is a system call)
            seconds = time.perf_counter() - t0
            choice = Choice(action, level, game, seconds, via="legal_list", cpu_seconds=seconds)
        else:
            if self._pool is None or level in INLINE_LEVELS:
                engine_legal = self._engine_actions(game, mod, legal) if level == "heuristic" else None
                choice = self._choose(
                    game, dict(view), seat, level, rng, budget, deadline, engine_legal, legal
                )
            else:
                ctx = contextvars.copy_context()
                loop = asyncio.get_running_loop()
                choice = await loop.run_in_executor(
                    self._pool, ctx.run, self._choose, game, dict(view), seat, level, rng, budget, deadline
                )
            # (an entry of ``legal`` itself, as _choose answers where it can, needs no comparing)
            if not any(a is choice.action for a in legal) and choice.action not in legal:
                log.error(
                    "the bot proposed an illegal move; playing a random legal one instead",
                    game=game,
                    level=level,
                    seat=seat,
                    action=kactions.to_json(choice.action),
                )
                ERRORS.labels("illegal_decision").inc()
                choice = Choice(
                    legal[rng.randrange(len(legal))],
                    level,
                    game,
                    choice.seconds,
                    choice.iterations,
                    via="fallback",
                    cpu_seconds=choice.cpu_seconds,
                )
        series = self._series.get((game, level, purpose))
        if series is None:
            series = self._series[(game, level, purpose)] = (
                DECISIONS.labels(game, level, purpose),
                DECISION_SECONDS.labels(game, level),
            )
        series[0].inc()
        series[1].observe(choice.seconds)
        self.recent[(game, level)].append((choice.seconds, choice.cpu_seconds))
        return choice

    async def decide_view(
        self,
        view: rules_pb2.GameView,
        seat: int,
        level: str,
        rng: random.Random,
        *,
        deadline: float | None = None,
        purpose: str = "turn",
    ) -> Choice:
        """``decide`` on a rules service's ``GameView`` of ``seat`` (its view and legal list). The
        random level reads the legal list alone: the view is not converted for it."""
        return await self.decide(
            view.game,
            {} if level == "random" else typed.view_from_proto(view.view),
            seat,
            level,
            list(view.legal_actions),
            rng,
            deadline=deadline,
            purpose=purpose,
        )

    def _engine_actions(
        self, game: str, mod: ModuleType, legal: Sequence[actions_pb2.Action]
    ) -> list[Any] | None:
        """The rules service's legal list as engine actions, for a heuristic that decides from the
        view and that list (``court_bots.choose``'s ``legal``); ``None`` where the heuristic reads a
        sample anyway. Each action's conversion is remembered by its bytes (a few hundred per game)."""
        if getattr(mod, "HEURISTIC_READS_SAMPLE", True):
            return None
        memo = self._parsed[game]
        out = []
        for a in legal:
            key = a.SerializeToString()
            engine = memo.get(key)
            if engine is None:
                if len(memo) >= PARSED_KEPT:
                    memo.clear()
                engine = memo[key] = get_game(game).action_from_json(kactions.to_json(a))
            out.append(engine)
        return out

    @staticmethod
    def _choose(
        game: str,
        view: dict[str, Any],
        seat: int,
        level: str,
        rng: random.Random,
        budget_ms: float,
        deadline: float | None,
        legal: list[Any] | None = None,
        protos: Sequence[actions_pb2.Action] = (),
    ) -> Choice:
        """``court_bots.choose``'s move as the rules service's action. With ``legal`` (the engine
        forms of ``protos``, the rules service's legal list) a move that is one of them is answered
        with its own entry there, not converted back."""
        t0, c0 = time.perf_counter(), time.thread_time()
        if deadline is not None:
            left_ms = (deadline - t0) * 1000
            if left_ms < MIN_BUDGET_MS:
                raise TooLate(
                    f"the deadline passed before the {level} bot could think: allow at least "
                    f"{budget_ms + 20:.0f} ms"
                )
            budget_ms = min(budget_ms, left_ms)
        decision = court_bots.choose(game, view, seat, level, rng, budget_ms, legal)
        found = None
        if legal is not None and len(legal) == len(protos):
            found = next((i for i, a in enumerate(legal) if a is decision.action), None)
        if found is not None:
            action = protos[found]
        else:
            module = get_game(game)
            action = kactions.from_json(game, module.action_to_json(decision.action, seat))
        return Choice(
            action,
            level,
            game,
            time.perf_counter() - t0,
            decision.iterations,
            cpu_seconds=time.thread_time() - c0,
        )
