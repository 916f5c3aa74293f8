"""``court api``: any service's gRPC API, through server reflection, with JSON in and out.

Every Court service answers the gRPC server reflection protocol (without a token), so a client needs
no generated code and no .proto files to talk to it: this module asks a service for its services,
methods and message types, builds the request from JSON (protobuf's JSON mapping, field names as in
the .proto), sends it with ``authorization: Bearer <token>``, and prints each answer as JSON. A
server-streaming method (``WatchGame``) prints one JSON object per message.

``court api list`` (every service of every address), ``court api list rules`` (its methods, with
their request and response types), ``court api call rules GetView '{"game_id": "g..."}'``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import json_format, message_factory
from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor
from google.protobuf.descriptor_pool import DescriptorPool
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

from .session import SERVICES, CliError, Endpoints

INFRASTRUCTURE = (
    "grpc.health.v1.Health",
    "grpc.reflection.v1alpha.ServerReflection",
    "grpc.reflection.v1.ServerReflection",
)


@dataclass
class Reflected:
    """One address's reflection: its channel and the descriptors it serves."""

    address: str
    channel: grpc.Channel
    db: ProtoReflectionDescriptorDatabase
    pool: DescriptorPool

    @classmethod
    def open(cls, address: str) -> Reflected:
        channel = grpc.insecure_channel(address)
        db = ProtoReflectionDescriptorDatabase(channel)
        return cls(address, channel, db, DescriptorPool(db))

    def close(self) -> None:
        self.channel.close()

    def services(self, *, everything: bool = False) -> list[str]:
        try:
            names = list(self.db.get_services())
        except grpc.RpcError as err:
            raise CliError(_unreachable(err, self.address)) from None
        return sorted(n for n in names if everything or n not in INFRASTRUCTURE)

    def service(self, name: str) -> ServiceDescriptor:
        return self.pool.FindServiceByName(name)


def _unreachable(err: grpc.RpcError, address: str) -> str:
    code = err.code() if hasattr(err, "code") else None
    if code == grpc.StatusCode.UNAVAILABLE:
        return f"cannot reach {address}: is the stack running? Start it with `make run`."
    return f"reflection at {address} failed: {code.name if code else err}"


def addresses(endpoints: Endpoints) -> dict[str, str]:
    return {s: getattr(endpoints, s) for s in SERVICES}


def resolve(endpoints: Endpoints, where: str) -> tuple[str, str | None]:
    """``rules`` / ``127.0.0.1:50051`` / a full service name -> (address, service name or None)."""
    addrs = addresses(endpoints)
    if where in addrs:
        return addrs[where], None
    if ":" in where:  # HOST:PORT
        return where, None
    for addr in addrs.values():
        r = Reflected.open(addr)
        try:
            if where in r.services():
                return addr, where
        except CliError:
            continue
        finally:
            r.close()
    raise CliError(
        f"no service {where[:60]!r}: name one of {', '.join(addrs)}, an address HOST:PORT, or a full "
        "service name (`court api list` shows them)"
    )


def signature(m: MethodDescriptor) -> str:
    stream_in = "stream " if m.client_streaming else ""
    stream_out = "stream " if m.server_streaming else ""
    return f"{m.name}({stream_in}{m.input_type.full_name}) returns ({stream_out}{m.output_type.full_name})"


def list_lines(endpoints: Endpoints, where: str = "") -> Iterator[str]:
    """What ``court api list`` prints: every address's services, or one service's methods."""
    if not where:
        for name, addr in addresses(endpoints).items():
            r = Reflected.open(addr)
            try:
                yield f"{name} {addr}: " + ", ".join(r.services())
            finally:
                r.close()
        return
    addr, service = resolve(endpoints, where)
    r = Reflected.open(addr)
    try:
        for sname in [service] if service else r.services():
            sd = r.service(sname)
            yield f"{sd.full_name} ({addr})"
            for m in sd.methods:
                yield "  " + signature(m)
    finally:
        r.close()


def find_method(r: Reflected, service: str | None, method: str) -> MethodDescriptor:
    if "/" in method:
        service, method = method.rsplit("/", 1)
        service = service.lstrip("/")
    names = [service] if service else r.services()
    for sname in names:
        sd = r.service(sname)
        m = sd.methods_by_name.get(method)
        if m is not None:
            return m
    known = ", ".join(m.name for sname in names for m in r.service(sname).methods)
    raise CliError(f"no method {method[:60]!r} at {r.address}; its methods: {known}")


def call(
    endpoints: Endpoints,
    where: str,
    method: str,
    request_json: str,
    token: str,
    *,
    timeout: float = 30.0,
    count: int = 0,
) -> Iterator[dict[str, Any]]:
    """Call ``method`` with the JSON request; each answer as a JSON-ready dict (one, or one per streamed message,
    ``count`` of them at most when non-zero)."""
    addr, service = resolve(endpoints, where)
    r = Reflected.open(addr)
    try:
        m = find_method(r, service, method)
        if m.client_streaming:
            raise CliError(f"{m.name} takes a stream of requests: `court api call` sends one")
        request_cls = message_factory.GetMessageClass(m.input_type)
        response_cls = message_factory.GetMessageClass(m.output_type)
        try:
            request = json_format.Parse(request_json or "{}", request_cls())
        except json_format.ParseError as exc:
            raise CliError(f"the request is not a {m.input_type.full_name} in JSON: {exc}") from None
        path = f"/{m.containing_service.full_name}/{m.name}"
        metadata = (("authorization", f"Bearer {token}"),) if token else ()
        kw = {
            "request_serializer": request_cls.SerializeToString,
            "response_deserializer": response_cls.FromString,
        }
        try:
            if m.server_streaming:
                stream = r.channel.unary_stream(path, **kw)(
                    request, metadata=metadata, timeout=timeout or None
                )
                shown = 0
                for answer in stream:
                    yield _as_dict(answer)
                    shown += 1
                    if count and shown >= count:
                        stream.cancel()
                        return
            else:
                yield _as_dict(
                    r.channel.unary_unary(path, **kw)(request, metadata=metadata, timeout=timeout or None)
                )
        except grpc.RpcError as err:
            code = err.code()
            if code == grpc.StatusCode.CANCELLED and count:
                return
            raise CliError(f"{m.name}: {code.name}: {err.details()}") from None
    finally:
        r.close()


def _as_dict(msg: Any) -> dict[str, Any]:
    # every field, those at their default value too (protobuf's JSON leaves out a 0, "" or false: seat 0,
    # a game not finished); optional fields still appear only when set
    out: dict[str, Any] = json.loads(
        json_format.MessageToJson(
            msg, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
        )
    )
    return out
