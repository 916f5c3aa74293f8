"""The stack's ceiling for tests.bench.service: a bare grpc.aio unary handler doing one JetStream
publish (awaiting its ack, with a Nats-Msg-Id) per call, nothing else: no engine, no views, no
authentication. Run as a process, on the event loop ``COURT_EVENT_LOOP`` names (as the rules
service does, through ``court_kit.server.run_loop``):

    python -m tests.bench._ceiling NATS_URL [edge]   # prints the port it listens on, then serves

With ``edge`` the same handler sits behind the services' shared gRPC edge
(``court_kit.server.EdgeInterceptor``: token verification, request id, logging context, metrics,
error mapping), configured from the COURT_ environment as the rules service's, so make bench
shows what the edge costs a call.
"""

from __future__ import annotations

import itertools
import os
import sys

import grpc
import nats
from court_kit.server import EdgeInterceptor, current_identity, run_loop
from court_kit.settings import Settings
from court_kit.tokens import Verifier
from nats.js.api import StreamConfig

STREAM = "BENCH_CEILING"
METHOD = "/bench.Ceiling/Call"


async def serve(nats_url: str, edge: bool = False) -> None:
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    await js.add_stream(StreamConfig(name=STREAM, subjects=["bench.ceiling.>"]))
    ids = itertools.count()

    async def call(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        n = next(ids)
        if edge:
            current_identity()  # as every servicer method does first
        await js.publish(f"bench.ceiling.{n % 64}", request, headers={"Nats-Msg-Id": f"c{n}"})
        return b"ok"

    interceptors = [EdgeInterceptor(Verifier.for_service(Settings.load("rules")))] if edge else []
    server = grpc.aio.server(interceptors=interceptors)
    server.add_generic_rpc_handlers(
        [
            grpc.method_handlers_generic_handler(
                "bench.Ceiling", {"Call": grpc.unary_unary_rpc_method_handler(call)}
            )
        ]
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(port, flush=True)
    await server.wait_for_termination()


if __name__ == "__main__":
    run_loop(serve(sys.argv[1], sys.argv[2:] == ["edge"]), os.environ.get("COURT_EVENT_LOOP", "uvloop"))
