"""The RulesService servicer: proto in, a call of the application layer, proto out.

What each call may do and how a move reaches the log is ``court_rules.application``; this module
only reads the request messages, names the caller (``court_kit.server.current_identity``) and
builds the answers (``court_rules.views``). Errors are ``court_kit.errors``, mapped to gRPC
statuses by the server at the edge.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import grpc
from court_contract import actions as kactions
from court_contract import typed
from court_kit.server import current_identity
from court_proto.court.rules.v1 import rules_pb2, rules_pb2_grpc

from . import clock as kclock
from .application import ClockRequest, Position, RulesApplication, Submitted
from .botviews import BotViews
from .views import answer_bytes, game_view, result_proto, update_bytes


def _seat(request: Any) -> int | None:
    return request.seat if request.HasField("seat") else None


class RulesServicer(rules_pb2_grpc.RulesServiceServicer):
    def __init__(self, app: RulesApplication):
        self.app = app
        self.codec = app.codec
        self.bot_views = BotViews(app.store.nc, app.codec)  # pushed after a person's move

    def _view(self, p: Position) -> rules_pb2.GameView:
        return game_view(p.entry, self.codec, p.state, p.seq, p.seat)

    async def CreateGame(
        self, request: rules_pb2.CreateGameRequest, context: Any
    ) -> rules_pb2.CreateGameResponse:
        c = request.clock
        created = await self.app.create_game(
            current_identity(),
            request_id=request.request_id,
            game=request.game,
            options=request.options,
            seats=list(request.seats),
            seed=int(request.seed) if request.HasField("seed") else None,
            game_id=request.game_id,
            resume_from=request.resume_from,
            online=request.online,
            clock=(
                ClockRequest(c.turn_seconds, c.time_bank_seconds, c.autoplay_level, c.abandon_after_seconds)
                if request.HasField("clock")
                else None
            ),
        )
        entry = created.entry
        return rules_pb2.CreateGameResponse(
            game_id=entry.game_id, view=game_view(entry, self.codec, created.state, 0, created.seat)
        )

    async def GetView(self, request: rules_pb2.GetViewRequest, context: Any) -> rules_pb2.GameView:
        return self._view(await self.app.view(current_identity(), request.game_id, _seat(request)))

    async def ListLegalActions(
        self, request: rules_pb2.ListLegalActionsRequest, context: Any
    ) -> rules_pb2.ListLegalActionsResponse:
        p, actions = await self.app.legal_actions(current_identity(), request.game_id, _seat(request))
        seat = p.seat
        assert seat is not None  # legal_actions answers a seat's own
        out = rules_pb2.ListLegalActionsResponse(game_id=p.entry.game_id, seq=p.seq, seat=seat)
        out.actions.extend(self.codec.proto(p.entry, a, seat) for a in actions)
        return out

    async def SubmitAction(  # type: ignore[override]  # its answer as bytes (add_to_server)
        self, request: rules_pb2.SubmitActionRequest, context: Any
    ) -> bytes:
        done = await self.app.submit(
            current_identity(),
            request_id=request.request_id,
            game_id=request.game_id,
            action=request.action if request.HasField("action") else None,
            seat=_seat(request),
            turn_seq=request.turn_seq if request.HasField("turn_seq") else None,
        )
        self.bot_views.offer(done)
        return self._submit_answer(done)

    def _submit_answer(self, done: Submitted) -> bytes:
        """The answer, serialized (``views.answer_bytes``): the acting seat's view, the move's
        events as that seat reads them, the views of the caller's other seats now to act. The bot
        identity gets the acting seat's view only while that seat is still to act: it plays from
        views of seats to act and nothing else (docs/contract.md, "The bot identity's answers")."""
        return answer_bytes(
            done.entry,
            self.codec,
            done.state,
            done.seq,
            done.seat,
            done.events,
            done.full,
            done.next_seats(),
            with_view=done.caller.role != "bot" or done.seat_to_act(),
        )

    async def WatchGame(  # type: ignore[override]  # GameUpdates as their bytes (add_to_server)
        self, request: rules_pb2.WatchGameRequest, context: Any
    ) -> AsyncIterator[bytes]:
        after = int(request.after_seq) if request.HasField("after_seq") else None
        follow = self.app.watch(current_identity(), request.game_id, _seat(request), after)
        async with contextlib.aclosing(follow) as positions:
            async for p in positions:
                yield update_bytes(p.entry, self.codec, p.state, p.seq, p.seat, p.events)

    async def CloseGame(
        self, request: rules_pb2.CloseGameRequest, context: Any
    ) -> rules_pb2.CloseGameResponse:
        closed = await self.app.close_game(
            current_identity(), request_id=request.request_id, game_id=request.game_id, reason=request.reason
        )
        if closed.position is not None:
            view = self._view(closed.position)
        else:
            # a tombstone: finished, the reason, and nothing else (no game, no seats, no view: there
            # never was a deal)
            assert closed.tomb is not None
            view = rules_pb2.GameView(game_id=closed.game_id, finished=True)
            view.result.finished = True
            view.result.closed_reason = closed.tomb.reason
        return rules_pb2.CloseGameResponse(game_id=closed.game_id, closed_now=closed.closed_now, view=view)

    async def GetHistory(
        self, request: rules_pb2.GetHistoryRequest, context: Any
    ) -> rules_pb2.GetHistoryResponse:
        entry = await self.app.history(current_identity(), request.game_id)
        out = rules_pb2.GetHistoryResponse(
            game=entry.game,
            game_id=entry.game_id,
            seed=entry.seed,
            seats=entry.seats,
            created_by=entry.created_by,
            to_act=entry.to_act(),
        )
        out.options.MergeFromString(entry.options_bytes)
        out.created.FromMilliseconds(entry.created_t)
        for seq, _state, events in entry.replay(-1, entry.seq):
            if seq == 0:
                out.created_events.extend([typed.event_to_proto(entry.game, e) for e in events])
                continue
            m = entry.moves[seq - 1]
            hm = out.moves.add(seq=seq, seat=m.seat, player=m.by, request_id=m.rid, kind=m.kind)
            if not m.is_seat_record:
                hm.action.CopyFrom(kactions.from_json(entry.game, m.action))
            hm.time.FromMilliseconds(m.t)
            hm.events.extend([typed.event_to_proto(entry.game, e) for e in events])
        result_proto(entry, entry.state, out.result, entry.closed_into is not None)
        return out

    async def _seat_change(self, request: Any, kind: str) -> rules_pb2.SeatResponse:
        done = await self.app.change_seat(
            current_identity(),
            request_id=request.request_id,
            game_id=request.game_id,
            seat=_seat(request),
            kind=kind,
        )
        p = done.position
        return rules_pb2.SeatResponse(seq=p.seq, view=self._view(p), changed=done.changed)

    async def ReturnToSeat(
        self, request: rules_pb2.ReturnToSeatRequest, context: Any
    ) -> rules_pb2.SeatResponse:
        return await self._seat_change(request, kclock.SEAT_RETURNED)

    async def LeaveSeat(self, request: rules_pb2.LeaveSeatRequest, context: Any) -> rules_pb2.SeatResponse:
        return await self._seat_change(request, kclock.SEAT_AWAY)


SENT_AS_BYTES = ("SubmitAction", "WatchGame")  # answers built serialized: views.answer_bytes, update_bytes


def _as_is(answer: bytes) -> bytes:
    """The response serializer of ``SENT_AS_BYTES``: their answers are built serialized."""
    return answer


class _Handlers:
    """Takes the method handlers the generated ``add_*_to_server`` registers."""

    def __init__(self) -> None:
        self.methods: dict[str, Any] = {}

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        pass

    def add_registered_method_handlers(self, service: str, methods: dict[str, Any]) -> None:
        self.methods = dict(methods)


def add_to_server(servicer: RulesServicer, server: Any) -> None:
    """``rules_pb2_grpc.add_RulesServiceServicer_to_server``, with SubmitAction's answers and
    WatchGame's updates sent as the bytes they are built as: the same wire format (a client's stub
    parses a ``SubmitActionResponse``, a ``GameUpdate``), no parse of views into a message and
    serialization again per answer, update and stream."""
    held = _Handlers()
    rules_pb2_grpc.add_RulesServiceServicer_to_server(servicer, held)
    methods = held.methods
    for method in SENT_AS_BYTES:
        methods[method] = methods[method]._replace(response_serializer=_as_is)
    name = rules_pb2.DESCRIPTOR.services_by_name["RulesService"].full_name
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(name, methods),))
    server.add_registered_method_handlers(name, methods)
