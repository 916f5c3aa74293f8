"""The SubmitAction handler's own Python, in process: what one move costs the rules server outside
the gRPC edge and nats-server.

Games of the service bench's mix (``GAME_MIX``) are played at random on ``GameEntry``
(``tests/bench/_viewstep.py``); each recorded move is then submitted again, as the bench's bot
driver sends it (the bot identity, the acting seat named, the typed action of the seat's view),
through ``RulesServicer.SubmitAction`` of a real ``RulesApplication`` and ``GameStore`` whose NATS
connection is a stand-in: the append's ``HPUB`` is built and queued as on a real connection
(``court_kit.jetstream.send_publish``) and its ack is the one nats-server sends, arriving in the
event loop's next turn. Per move, the CPU of

* ``handler``: the whole ``SubmitAction`` (the application's submit, the record, the append, the
  answer with its views);
* ``views``: the answer's views alone (``views.view_bytes`` of the same positions, built afresh),
  so ``handler - views`` is the handler's Python outside the views;
* the parts (``parts``): ``GameEntry.propose``, ``move_record_bytes``, ``GameStore.append`` and
  ``commit``, each timed on its own over the same moves.

Each figure is the best of ``REPEAT`` timed passes over every recorded move (CPU time). Run
``python -m tests.bench._submitstep`` (``BENCH_GAMES`` games, default 24).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Coroutine
from typing import Any

from court_kit import server as kserver
from court_kit.tokens import Identity
from court_proto.court.rules.v1 import rules_pb2
from court_rules.application import RulesApplication
from court_rules.games import GameCache, GameEntry
from court_rules.servicer import RulesServicer
from court_rules.store import GameStore
from court_rules.views import view_bytes

from tests.bench._viewstep import Played, play

REPEAT = int(os.environ.get("BENCH_REPEAT", "7"))
BOT = Identity("bot", "bot", 2**40)


class _Conn:
    """The parts of nats-py's ``Client`` a publish touches (``court_kit.jetstream.send_publish``)."""

    is_closed = False
    is_draining_pubs = False
    is_connected = True
    _max_pending_size = 1 << 30
    _max_payload = 1 << 20
    _flush_queue = None
    _flusher_task = None

    def __init__(self) -> None:
        self._pending: list[bytes] = []
        self._pending_data_size = 0
        self.stats = {"out_msgs": 0, "out_bytes": 0}
        self._n = 0

    def new_inbox(self) -> str:
        return "_INBOX.bench"

    def jetstream(self, timeout: float) -> None:
        return None

    async def subscribe(self, subject: str) -> Any:
        class _Sub:
            _future: Any = None

        return _Sub()


class _Acked:
    """``kjs.Publisher`` whose every publish is acked at once, with nats-server's PubAck bytes."""

    def __init__(self, publisher: Any, conn: _Conn):
        self.publisher = publisher
        self.conn = conn
        self.sseq = 1000

    async def publish(
        self, subject: str, data: bytes, headers: dict[str, str], *, now: bool = False
    ) -> asyncio.Future[bytes]:
        fut = await self.publisher.publish(subject, data, headers, now=now)
        self.sseq += 1
        token = next(reversed(self.publisher._futures))
        self.publisher._futures.pop(token)
        # the ack arrives in the loop's next turn, as nats-py's reader hands it over (the append waits)
        fut.get_loop().call_soon(fut.set_result, b'{"stream":"COURT_GAMES_0","seq":%d}' % self.sseq)
        if len(self.conn._pending) > 256:
            self.conn._pending.clear()
            self.conn._pending_data_size = 0
        return fut

    def forget(self, futures: Any) -> None:
        self.publisher.forget(futures)


def _fresh(p: Played) -> GameEntry:
    e = p.entry
    create = {
        "k": "c",
        "game": e.game,
        "options": e.options_dict,
        "seed": e.seed,
        "seats": list(e.seats),
        "by": e.created_by,
        "rid": e.created_rid,
        "t": e.created_t,
    }
    return GameEntry(e.game_id, create, 1)


def _best(fn: Callable[[], float]) -> float:
    return min(fn() for _ in range(REPEAT))


async def _measure(games: int) -> dict[str, float]:
    from tests.bench.service import GAME_MIX

    played = play(GAME_MIX, games)
    conn = _Conn()
    store = GameStore(conn)  # type: ignore[arg-type]
    store.publisher = _Acked(store.publisher, conn)  # type: ignore[assignment]
    await store.publisher.publisher._ensure()
    app = RulesApplication(store, GameCache(store), id_secret="bench")
    servicer = RulesServicer(app)
    codec = app.codec
    kserver._IDENTITY.set(BOT)
    n_moves = sum(len(p.moves) for p in played)
    requests = []
    for p in played:
        e = p.entry
        reqs = []
        for k, (seat, _before, action, _after, _shown, _seq) in enumerate(p.moves):
            reqs.append(
                rules_pb2.SubmitActionRequest(
                    game_id=e.game_id,
                    request_id=f"r{k}-{'x' * 20}",
                    action=codec.proto(e, action, seat),
                    seat=seat,
                )
            )
        requests.append(reqs)

    async def handler() -> float:
        entries = [_fresh(p) for p in played]
        for e in entries:
            app.cache.put(e)
        t0 = time.process_time()
        for reqs in requests:
            for r in reqs:
                await servicer.SubmitAction(r, None)
        return time.process_time() - t0

    def views() -> float:
        entries = [_fresh(p) for p in played]
        t0 = time.process_time()
        for p, e in zip(played, entries, strict=True):
            for _seat, _before, _action, after, shown, seq in p.moves:
                for s in shown:  # the mover's view only while it is still to act (the bot identity)
                    if s != shown[0] or s in e.module.to_act(after):
                        view_bytes(e, codec, after, seq, s)
        return time.process_time() - t0

    def parts() -> dict[str, float]:
        """propose, move_record_bytes, commit on fresh entries (each move once, in order)."""
        out = {"propose": 0.0, "record": 0.0, "commit": 0.0}
        entries = [_fresh(p) for p in played]
        pc = time.process_time
        for p, e in zip(played, entries, strict=True):
            for k, (seat, _before, action, _after, _shown, _seq) in enumerate(p.moves):
                aj = {k2: v for k2, v in e.module.action_to_json(action, seat).items() if k2 != "player"}
                typed_action = codec.proto(e, action, seat)
                t0 = pc()
                move, state, events = e.propose(seat, action, aj, "bot", f"r{k}", 5)
                t1 = pc()
                e.move_record_bytes(move, state, events, typed_action)
                t2 = pc()
                e.commit(move, state, events, e.last_sseq + 1)
                t3 = pc()
                out["propose"] += t1 - t0
                out["record"] += t2 - t1
                out["commit"] += t3 - t2
        return out

    async def append() -> float:
        data = b"x" * 300
        t0 = time.process_time()
        for i in range(n_moves):
            await store.append("g0123456789abcdef01234567", data, i + 1, i, due=None)
        return time.process_time() - t0

    hs = [await handler() for _ in range(REPEAT)]
    vs = [views() for _ in range(REPEAT)]
    ps = [parts() for _ in range(REPEAT)]
    aps = [await append() for _ in range(REPEAT)]
    us = 1e6 / n_moves
    out = {
        "moves": n_moves,
        "handler": min(hs) * us,
        "views": min(vs) * us,
        "append": min(aps) * us,
    }
    for key in ("propose", "record", "commit"):
        out[key] = min(p[key] for p in ps) * us
    return out


def main() -> None:
    games = int(os.environ.get("BENCH_GAMES", "24"))
    r = asyncio.run(_run(_measure(games)))
    print(
        f"{int(r['moves'])} moves: handler {r['handler']:.1f} us/move, views {r['views']:.1f}, "
        f"handler - views {r['handler'] - r['views']:.1f}; parts: propose {r['propose']:.1f}, "
        f"move_record_bytes {r['record']:.1f}, commit {r['commit']:.1f}, append {r['append']:.1f}"
    )


async def _run(c: Coroutine[Any, Any, dict[str, float]]) -> dict[str, float]:
    return await c


if __name__ == "__main__":
    main()
