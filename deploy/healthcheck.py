"""gRPC health check for a Court container: exit 0 when the server answers SERVING, 1 otherwise.

    python /app/healthcheck.py [HOST:PORT] [--service NAME] [--timeout SECONDS]

Without an address it checks the port of ``COURT_LISTEN`` on the loopback interface, so one image
HEALTHCHECK fits every service. Used by the Dockerfile and docker-compose.yml; Kubernetes uses the
kubelet's built-in ``grpc`` probe instead.
"""

from __future__ import annotations

import argparse
import os
import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

_WILDCARD_HOSTS = {"", "0.0.0.0", "[::]", "::", "*"}


def target_from_listen(listen: str) -> str:
    """Turn a listen address (``0.0.0.0:50051``, ``[::]:50051``, ``:50051``) into one to dial."""
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"not a HOST:PORT address: {listen!r}")
    if host in _WILDCARD_HOSTS:
        host = "127.0.0.1"
    return f"{host}:{port}"


def check(target: str, service: str = "", timeout: float = 2.0) -> tuple[bool, str]:
    with grpc.insecure_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
        except grpc.RpcError as err:
            return False, f"{target}: {err.code().name}: {err.details()}"
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    return reply.status == health_pb2.HealthCheckResponse.SERVING, f"{target}: {status}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("address", nargs="?", help="HOST:PORT (default: the port of COURT_LISTEN)")
    parser.add_argument("--service", default="", help="health service name ('' = the whole server)")
    parser.add_argument("--timeout", type=float, default=2.0)
    args = parser.parse_args(argv)
    listen = args.address or os.environ.get("COURT_LISTEN")
    if not listen:
        print("healthcheck: no address given and COURT_LISTEN is not set", file=sys.stderr)
        return 1
    try:
        target = target_from_listen(listen)
    except ValueError as err:
        print(f"healthcheck: {err}", file=sys.stderr)
        return 1
    ok, detail = check(target, args.service, args.timeout)
    print(detail, file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
