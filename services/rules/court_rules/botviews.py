"""Bot seats' views pushed to the bot service after a person's move (issue 31).

A bot seat that is to act after a bot's own move gets its view in the bot's submit answer
(``SubmitActionResponse.next``); after a person's move the bot service used to read it with a
``GetView`` of its own, a quarter of the stack's gRPC calls per move in ``make bench ONLY=stack``.
Instead, the rules replica that applied a person's move publishes each bot seat's view of the new
position, built as ``GetView`` would answer the bot identity for that seat (the same memoised bytes,
``court_rules.views.view_bytes``), on ``court.botviews.<game_id>`` (core NATS, no stream,
``court_contract.records.bot_views_subject``). It leaves with the connection's next write, the
move's own append or public record (``court_kit.jetstream.LazyAcks.publish``): no write of its own.

Who reads it: only the bot identity may subscribe to ``court.botviews.>`` and only the rules
identity publish there (``court_kit.natsauth``); it carries views of bot seats, which the bot
identity may read anyway (``Identity.may_view``), never a person's seat.

It is a cache, not a turn: nothing waits for it, nobody acknowledges it. A view lost (no bot
replica connected, NATS away, a replica that was not subscribed yet), late (it came after the turn's
record) or pushed to a replica the turn did not go to is simply not used, and the bot reads the view
with ``GetView`` as before; one pushed twice is kept once. The turn itself is the public record,
played exactly once as before (``court_bot.turns``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from court_contract.records import bot_views_subject
from court_kit import jetstream as kjs
from court_kit import logging as klog
from court_kit.keys import BOT_SEAT_PREFIX
from nats.aio.client import Client as NATS

from .views import ActionCodec, view_bytes

if TYPE_CHECKING:
    from .application import Submitted

log = klog.get_logger("court_rules.botviews")


class BotViews:
    """Publishes the views of the bot seats a person's move left to act."""

    def __init__(self, nc: NATS, codec: ActionCodec):
        self.codec = codec
        self.out = kjs.LazyAcks(nc)
        self.pushed = 0  # views published (tests, the bench)

    def offer(self, done: Submitted) -> None:
        """After a move: the bot seats now to act, when a person (not the bot identity) moved and
        the move was applied now (a retry's replayed answer pushes nothing)."""
        if done.caller.role == "bot" or not done.full:
            return
        entry = done.entry
        for seat in entry.module.to_act(done.state):
            if not entry.seats[seat].startswith(BOT_SEAT_PREFIX):
                continue
            try:
                self.out.publish(
                    bot_views_subject(entry.game_id),
                    view_bytes(entry, self.codec, done.state, done.seq, seat),
                )
            except Exception as exc:  # noqa: BLE001 - only a cache: the bot reads the view then
                log.debug("could not push a bot seat's view", error=str(exc) or type(exc).__name__)
                return
            self.pushed += 1
