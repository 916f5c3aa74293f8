"""The stack's ceiling for tests.bench.service: a bare grpc.aio unary handler doing one JetStream
publish (awaiting its ack, with a Nats-Msg-Id) per call, nothing else: no engine, no views, no
authentication. Run as a process, on the event loop ``COURT_EVENT_LOOP`` names (as the rules
service does, through ``court_kit.server.run_loop``):

    python -m tests.bench._ceiling NATS_URL [edge|contract|projector|streams]   # prints its port, then serves

With ``edge`` the same handler sits behind the services' shared gRPC edge
(``court_kit.server.EdgeInterceptor``: token verification, request id, logging context, metrics,
error mapping), configured from the COURT_ environment as the rules service's and installed on the
server as every service's is (``EdgeInterceptor.install``, no interceptor), so make bench shows
what the edge costs a call.

``contract`` and ``projector`` are the events-v2 contract with no game in it (make bench's
``contract`` mode): the handler appends the request's bytes to a per-game log subject as the rules
service appends a record (``court_kit.jetstream.Publisher``, ``Nats-Expected-Last-Subject-Sequence``
on the game's log, a seq header; the game is the request's first three bytes) and answers ``ok``;
the ``projector`` process follows that log as court-projector does (a durable pull consumer read
by ``court_kit.jetstream.OneShotPuller``, explicit acks) and republishes each message's bytes unchanged on
a public subject with ``Nats-Msg-Id`` and ``Nats-Expected-Last-Subject-Sequence``, acknowledging it
once stored (while busy, each request waits ``COURT_PROJECTOR_LINGER`` as the projector's do). What the messaging of the contract costs before any engine, view or redaction: an
upper bound on the ratio any implementation of the contract on this stack can reach.

``streams`` is the ceiling's handler with server streams beside it (make bench's ``streams``
mode): ``/bench.Ceiling/Watch`` streams to its caller, for the game its request names (the
request's first three bytes), one message of ``UPDATE`` bytes (a WatchGame update's mean size) per call
of that game, each call's after its publish, as the rules service's watchers get one update per
move. What a paced server stream costs gRPC per message with no view, wake or handler work.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import sys
from typing import Any

import grpc
import nats
from court_kit import jetstream as kjs
from court_kit.server import EdgeInterceptor, current_identity, run_loop
from court_kit.settings import Settings
from court_kit.tokens import Verifier
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StreamConfig

STREAM = "BENCH_CEILING"
METHOD = "/bench.Ceiling/Call"
LOG_STREAM, PUBLIC_STREAM = "BENCH_LOG", "BENCH_PUBLIC"
LINGER = float(os.environ.get("COURT_PROJECTOR_LINGER", "0.003"))  # the projector's default
BATCH = 256  # the projector's default batch (COURT_PROJECTOR_BATCH)
# the mean WatchGame update of the service bench's mix (streams), serialized: 422 bytes over the
# updates of 24 games played as tests/bench/_viewstep.py plays them (hearts 387, queens_court 534,
# court_wars 366, the_court 327)
UPDATE = b"u" * 422


async def serve(nats_url: str, variant: str = "") -> None:
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    await js.add_stream(StreamConfig(name=STREAM, subjects=["bench.ceiling.>"]))
    await js.add_stream(StreamConfig(name=LOG_STREAM, subjects=["bench.log.>"]))
    await js.add_stream(StreamConfig(name=PUBLIC_STREAM, subjects=["bench.public.>"]))
    if variant == "projector":
        await project(nc, js)
        return
    ids = itertools.count()
    publisher = kjs.Publisher(nc)
    last: dict[bytes, tuple[int, int]] = {}  # game -> (its last log sequence, its seq)

    watchers: dict[bytes, list[asyncio.Queue[bytes]]] = {}  # streams: a game's streams

    async def call(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        n = next(ids)
        if variant == "edge":
            current_identity()  # as every servicer method does first
        if variant != "contract":
            await js.publish(f"bench.ceiling.{n % 64}", request, headers={"Nats-Msg-Id": f"c{n}"})
            if variant == "streams":
                for q in watchers.get(request[:3], ()):
                    q.put_nowait(UPDATE)
            return b"ok"
        game = request[:3]
        sseq, seq = last.get(game, (0, 0))
        subject = f"bench.log.{game.decode()}"
        fut = await publisher.publish(
            subject,
            request,
            {
                "Nats-Expected-Last-Subject-Sequence": str(sseq),
                "Nats-Expected-Last-Subject-Sequence-Subject": subject,
                "Court-Seq": str(seq + 1),
            },
        )
        last[game] = (int(json.loads(await asyncio.wait_for(fut, 5.0))["seq"]), seq + 1)
        return b"ok"

    async def watch(request: bytes, context: grpc.aio.ServicerContext) -> Any:
        q: asyncio.Queue[bytes] = asyncio.Queue()
        mine = watchers.setdefault(request[:3], [])
        mine.append(q)
        try:
            while True:
                yield await q.get()
        finally:
            mine.remove(q)

    server = grpc.aio.server()
    if variant == "edge":  # installed as create_server installs it for every service
        EdgeInterceptor(Verifier.for_service(Settings.load("rules"))).install(server)
    server.add_generic_rpc_handlers(
        [
            grpc.method_handlers_generic_handler(
                "bench.Ceiling",
                {
                    "Call": grpc.unary_unary_rpc_method_handler(call),
                    "Watch": grpc.unary_stream_rpc_method_handler(watch),
                },
            )
        ]
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(port, flush=True)
    await server.wait_for_termination()


async def project(nc: nats.NATS, js: nats.js.JetStreamContext) -> None:
    """The bare projector: the log's messages, republished in order, each acknowledged once stored."""
    psub = await js.pull_subscribe(
        "bench.log.>",
        durable="bench-projector",
        stream=LOG_STREAM,
        config=ConsumerConfig(
            ack_policy=AckPolicy.EXPLICIT,
            deliver_policy=DeliverPolicy.ALL,
            max_ack_pending=20_000,
            max_waiting=512,
        ),
    )
    puller = kjs.OneShotPuller(psub, BATCH)
    publisher = kjs.Publisher(nc)
    last: dict[str, int] = {}  # public subject -> its last stream sequence
    print(0, flush=True)

    async def game(msgs: list[nats.aio.msg.Msg]) -> None:
        for m in msgs:
            subject = "bench.public." + m.subject.rsplit(".", 1)[1]
            fut = await publisher.publish(
                subject,
                m.data,
                {
                    "Nats-Msg-Id": f"{subject}-{m.headers['Court-Seq'] if m.headers else ''}",
                    "Nats-Expected-Last-Subject-Sequence": str(last.get(subject, 0)),
                    "Court-Log-Seq": str(m.metadata.sequence.stream),
                },
            )
            last[subject] = int(json.loads(await asyncio.wait_for(fut, 5.0))["seq"])
            await m.ack()

    while True:
        busy = puller.waited < LINGER  # as court_rules.projector.Projector._next
        try:
            msgs = await puller.next_batch(1.0, delay=LINGER if busy else 0.0)
        except (TimeoutError, nats.errors.TimeoutError):
            continue
        games: dict[str, list[nats.aio.msg.Msg]] = {}
        for m in msgs:
            games.setdefault(m.subject, []).append(m)
        if len(games) == 1:
            await game(msgs)
        else:
            await asyncio.gather(*(game(g) for g in games.values()))


if __name__ == "__main__":
    run_loop(
        serve(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else ""),
        os.environ.get("COURT_EVENT_LOOP", "uvloop"),
    )
