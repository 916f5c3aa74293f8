"""``court.bot.v1.BotService``: ``Suggest``, a hint from the caller's own view.

The view is the one the caller sends (``SuggestRequest.view``: what GetView or WatchGame gave it),
or else is read from the rules service with the caller's own token (forwarded as is), so a hint
can only ever come from what the caller may see: asking for another player's seat is refused by
the rules service (PERMISSION_DENIED), a bad token likewise (UNAUTHENTICATED), and those codes
are passed on unchanged. A view sent along is checked against the request (its game, its seat,
the seat the caller's identity holds in it) and decided from as it is, without a call to the rules
service: the bot cannot tell it from a forged one, but the hint goes to the caller alone and is
only advice (the move is judged when submitted), so a forged view misleads only its forger. The
decision runs within the level's time budget, or within the call's deadline when that is shorter.

Errors: INVALID_ARGUMENT for an unknown level or a level this build does not play for the game
(the message lists the levels that do), and for a view sent along that is of another game or
seat, of a seat the caller does not hold, or that cannot be played from; PERMISSION_DENIED for a
caller without a seat in the game;
FAILED_PRECONDITION when the seat is not to act or the game is over; NOT_FOUND for an unknown
game; UNAVAILABLE when the rules service does not answer.
"""

from __future__ import annotations

import time
from typing import Any

import grpc
from court_client import RulesClient
from court_games.registry import GAME_NAMES
from court_kit import logging as klog
from court_kit.checks import quote
from court_kit.errors import FailedPrecondition, InvalidArgument, PermissionDenied
from court_kit.server import current_identity
from court_kit.tokens import Identity
from court_proto.court.bot.v1 import bot_pb2, bot_pb2_grpc
from court_proto.court.rules.v1 import rules_pb2

from .decide import Decider, TooLate, position_rng
from .upstream import passed_on

log = klog.get_logger("court_bot.suggest")

# Time kept back from the caller's deadline for reading the view and answering.
DEADLINE_MARGIN_S = 0.005


def bearer(context: grpc.aio.ServicerContext) -> str:
    for key, value in context.invocation_metadata() or ():
        if key == "authorization":
            text: str = value
            return text[7:].strip() if text[:7].lower() == "bearer " else text.strip()
    return ""


class BotServicer(bot_pb2_grpc.BotServiceServicer):
    def __init__(
        self, rules_channel: grpc.aio.Channel, decider: Decider, secret: str, *, rules_timeout: float = 5.0
    ):
        self.channel = rules_channel
        self.decider = decider
        self._secret = secret
        self.rules_timeout = rules_timeout

    async def Suggest(self, request: bot_pb2.SuggestRequest, context: Any) -> bot_pb2.SuggestResponse:
        ident = current_identity()
        level = request.level
        if level and level not in self.decider.budgets_ms:
            raise InvalidArgument(
                f"unknown bot level {quote(level)}; levels: "
                f"{', '.join(self.decider.budgets_ms)} (empty: the strongest)"
            )
        if not request.game_id:
            raise InvalidArgument("game_id is required")
        klog.bind(game_id=request.game_id)
        given = request.HasField("view")
        if given:
            view = request.view
            given_view_checked(request, ident)
        else:
            remaining = context.time_remaining()
            timeout = (
                self.rules_timeout if remaining is None else max(min(self.rules_timeout, remaining), 0.001)
            )
            rules = RulesClient(self.channel, bearer(context), retries=2, timeout=timeout)
            try:
                view = await rules.get_view(
                    request.game_id, request.seat if request.HasField("seat") else None
                )
            except grpc.aio.AioRpcError as err:
                raise passed_on(err) from None
        if not view.HasField("your_seat"):
            raise PermissionDenied("you have no seat in this game: a hint is for one of your own seats")
        seat = view.your_seat
        if view.finished:
            raise FailedPrecondition("the game is over")
        if seat not in view.to_act:
            raise FailedPrecondition(
                f"seat {seat} is not to act now (to act: {list(view.to_act)}); ask again on your turn"
            )
        level = level or self.decider.levels_for(view.game)[0]
        self.decider.check_level(view.game, level)
        remaining = context.time_remaining()
        deadline = None if remaining is None else time.perf_counter() + remaining - DEADLINE_MARGIN_S
        rng = position_rng(self._secret, "suggest", ident.sub, view.game_id, view.seq, seat, level)
        try:
            choice = await self.decider.decide_view(
                view, seat, level, rng, deadline=deadline, purpose="suggest"
            )
        except TooLate:
            raise
        except Exception as exc:
            if not given:
                raise
            # the rules service's own views always decide; one sent along may be anything
            raise InvalidArgument(
                f"the view sent along cannot be played from ({type(exc).__name__}: {str(exc)[:200]}); "
                "send the view as GetView or WatchGame gave it, or leave it out"
            ) from None
        log.debug("suggested", seat=seat, level=level, ms=round(choice.seconds * 1000, 2))
        return bot_pb2.SuggestResponse(
            action=choice.action, seq=view.seq, explanation=choice.explain(seat, view.seq)
        )


def given_view_checked(request: bot_pb2.SuggestRequest, ident: Identity) -> None:
    """INVALID_ARGUMENT unless ``request.view`` is of the request's game, of the requested seat
    (when one is), and of a seat the caller holds (a player's own seat, any bot seat for the bot
    role, any seat for an admin, as the rules service would have given it)."""
    view: rules_pb2.GameView = request.view
    if view.game_id != request.game_id:
        raise InvalidArgument(
            f"the view sent along is of game {quote(view.game_id)}, not of game_id {quote(request.game_id)}"
        )
    if view.game not in GAME_NAMES:
        raise InvalidArgument(f"the view sent along is of an unknown game {quote(view.game)}")
    if not view.HasField("your_seat"):
        raise InvalidArgument(
            "the view sent along is a spectator's (no your_seat): send the view of your own seat"
        )
    seat = view.your_seat
    if request.HasField("seat") and request.seat != seat:
        raise InvalidArgument(f"the view sent along is seat {seat}'s, not seat {request.seat}'s")
    if not 0 <= seat < len(view.seats):
        raise InvalidArgument(f"the view sent along has no seat {seat} among its {len(view.seats)} seats")
    if not ident.may_view(view.seats[seat]):
        raise InvalidArgument(
            f"the view sent along is seat {seat}'s, which is not yours: send the view of your own seat"
        )
