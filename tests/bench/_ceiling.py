"""The stack's ceiling for tests.bench.service: a bare grpc.aio unary handler doing one JetStream
publish (awaiting its ack, with a Nats-Msg-Id) per call, nothing else. Run as a process:

    python -m tests.bench._ceiling NATS_URL [EVENTS]   # prints the port it listens on, then serves

With ``EVENTS`` > 0 the same handler also stores what the event contract asks of every move
(protos/court/events/v1/README.md): ``EVENTS`` events, each in the public and the full-information
stream on its own subject, pipelined, the end markers once the rest are acknowledged, as the rules
service publishes them. That is the floor of a move's writes on this stack: no engine, no views,
no authentication. Every move has at least two events (``ActionApplied`` and ``TurnStarted`` or
``GameEnded``).
"""

from __future__ import annotations

import asyncio
import itertools
import sys

import grpc
import nats
from court_kit.jetstream import Publisher
from nats.js.api import StreamConfig

STREAM = "BENCH_CEILING"
METHOD = "/bench.Ceiling/Call"
PAYLOAD = b"e" * 120  # about a public event's size


async def serve(nats_url: str, events: int = 0) -> None:
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    tag = f"e{events}"
    await js.add_stream(StreamConfig(name=f"{STREAM}_{tag}", subjects=[f"bench.ceiling.{tag}.>"]))
    publisher = Publisher(nc)
    ids = itertools.count()

    async def call(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        n = next(ids)
        await js.publish(f"bench.ceiling.{tag}.{n % 64}", request, headers={"Nats-Msg-Id": f"c{n}"})
        if events:
            body, ends = [], []
            for stream in ("public", "full"):
                for i in range(events):
                    headers = {"Nats-Msg-Id": f"{stream}-{n}-{i}", "Court-Seq": str(n)}
                    msg = (f"bench.ceiling.{tag}.{stream}.{n % 64}.type{i}", PAYLOAD, headers)
                    if i == events - 1:
                        headers["Court-End"] = "1"
                        ends.append(msg)
                    else:
                        body.append(msg)
            await publisher.publish_all(body)
            await publisher.publish_all(ends)
        return b"ok"

    server = grpc.aio.server()
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(
        "bench.Ceiling", {"Call": grpc.unary_unary_rpc_method_handler(call)})])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(port, flush=True)
    await server.wait_for_termination()


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 0))
