"""The stack's ceiling for tests.bench.service: a bare grpc.aio unary handler doing one JetStream
publish (awaiting its ack, with a Nats-Msg-Id) per call, nothing else: no engine, no views, no
authentication. Run as a process, on the event loop ``COURT_EVENT_LOOP`` names (as the rules
service does, through ``court_kit.server.run_loop``):

    python -m tests.bench._ceiling NATS_URL   # prints the port it listens on, then serves
"""

from __future__ import annotations

import itertools
import os
import sys

import grpc
import nats
from court_kit.server import run_loop
from nats.js.api import StreamConfig

STREAM = "BENCH_CEILING"
METHOD = "/bench.Ceiling/Call"


async def serve(nats_url: str) -> None:
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    await js.add_stream(StreamConfig(name=STREAM, subjects=["bench.ceiling.>"]))
    ids = itertools.count()

    async def call(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        n = next(ids)
        await js.publish(f"bench.ceiling.{n % 64}", request, headers={"Nats-Msg-Id": f"c{n}"})
        return b"ok"

    server = grpc.aio.server()
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(
        "bench.Ceiling", {"Call": grpc.unary_unary_rpc_method_handler(call)})])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(port, flush=True)
    await server.wait_for_termination()


if __name__ == "__main__":
    run_loop(serve(sys.argv[1]), os.environ.get("COURT_EVENT_LOOP", "uvloop"))
