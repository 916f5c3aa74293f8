"""``court-rules`` with views that cost nothing, for make bench's ``noviews`` mode: not the service.

The rules service exactly as ``court-rules`` runs it (its settings from the same ``COURT_``
environment), except that ``court_rules.views._build_view`` (a view's bytes) answers only what a driver reads to
play on: ``to_act``, ``finished``, ``your_seat`` and the seat's legal actions. No engine view, no
typed view, no clock, no options, no result. What the service costs with every view free: the
bound that no faster view (compiled, cached or smaller) can pass, measured beside the service in
one run.

    python -m tests.bench._noviews      # serves as court-rules does
"""

from __future__ import annotations

import sys
from typing import Any

from court_proto.court.rules.v1 import rules_pb2
from court_rules import app, views


def _bare_view(
    entry: Any, codec: views.ActionCodec, state: Any, seq: int, seat: int | None, closed: bool
) -> bytes:
    module = entry.module
    acting = () if closed else module.to_act(state)
    v = rules_pb2.GameView(
        game=entry.game,
        game_id=entry.game_id,
        seq=seq,
        to_act=acting,
        finished=closed or module.is_terminal(state),
    )
    if seat is not None:
        v.your_seat = seat
        if seat in acting:
            v.legal_actions.extend([codec.proto(entry, a, seat) for a in module.legal_actions(state, seat)])
    return v.SerializeToString()


if __name__ == "__main__":
    views._build_view = _bare_view  # noqa: SLF001 - the one part this process changes
    sys.exit(app.main())
