"""The parts of the rules service's answers make bench's drivers read, as messages of their own.

A driver (like any client) needs a reply's next seats and their legal actions, not the engine's
view or the events: parsing those (``google.protobuf.Struct`` trees) cost the driver more CPU
than the call itself. ``SlimSubmit`` and ``SlimView`` keep, with the very field numbers and types
of ``SubmitActionResponse`` and ``GameView`` (copied from their descriptors, so a renumbered field
follows), only the fields the drivers read; protobuf skips the rest as unknown fields.
"""

from __future__ import annotations

from typing import Any

from court_client.base import new_request_id
from court_client.rules import RETRY_MOVE, RETRY_READ
from court_proto.court.rules.v1 import rules_pb2
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

VIEW_FIELDS = ("to_act", "your_seat", "finished", "legal_actions")
SUBMIT_FIELDS = ("seq", "view", "next")


def _slim(
    source: Any, name: str, keep: tuple[str, ...], renames: dict[str, str]
) -> descriptor_pb2.DescriptorProto:
    full = descriptor_pb2.DescriptorProto()
    source.CopyToProto(full)
    out = descriptor_pb2.DescriptorProto(name=name)
    for f in full.field:
        if f.name in keep:
            g = out.field.add()
            g.CopyFrom(f)
            if g.type_name in renames:
                g.type_name = renames[g.type_name]
            if g.HasField("oneof_index"):  # proto3 `optional`: its synthetic oneof comes along
                g.oneof_index = len(out.oneof_decl)
                out.oneof_decl.add(name=full.oneof_decl[f.oneof_index].name)
    missing = set(keep) - {f.name for f in out.field}
    if missing:
        raise LookupError(
            f"{source.full_name} has no field {', '.join(sorted(missing))}: update tests/bench/slim.py"
        )
    return out


def _build() -> tuple[type[Any], type[Any]]:
    pool = descriptor_pool.Default()
    name = "tests/bench/slim.proto"
    try:
        pool.FindFileByName(name)
    except KeyError:
        view = rules_pb2.GameView.DESCRIPTOR
        submit = rules_pb2.SubmitActionResponse.DESCRIPTOR
        file = descriptor_pb2.FileDescriptorProto(
            name=name,
            package="court.bench.slim",
            syntax="proto3",
            dependency=[d.name for d in view.file.dependencies],
        )
        file.message_type.append(_slim(view, "SlimView", VIEW_FIELDS, {}))
        file.message_type.append(
            _slim(submit, "SlimSubmit", SUBMIT_FIELDS, {f".{view.full_name}": ".court.bench.slim.SlimView"})
        )
        pool.Add(file)
    return (
        message_factory.GetMessageClass(pool.FindMessageTypeByName("court.bench.slim.SlimView")),
        message_factory.GetMessageClass(pool.FindMessageTypeByName("court.bench.slim.SlimSubmit")),
    )


SlimView, SlimSubmit = _build()


class SlimRules:
    """``RulesClient``'s submit and get_view (same requests, metadata and retries), answered as
    ``SlimSubmit`` and ``SlimView``."""

    calls = 0  # every instance's calls, retries included (make bench prints RPCs per move)

    def __init__(self, client: Any):
        self.client = client
        self._retry_move, self._retry_read = RETRY_MOVE, RETRY_READ
        ch = client.channel
        service = "/" + rules_pb2.DESCRIPTOR.services_by_name["RulesService"].full_name
        self._submit = ch.unary_unary(
            f"{service}/SubmitAction",
            request_serializer=rules_pb2.SubmitActionRequest.SerializeToString,
            response_deserializer=SlimSubmit.FromString,
        )
        self._view = ch.unary_unary(
            f"{service}/GetView",
            request_serializer=rules_pb2.GetViewRequest.SerializeToString,
            response_deserializer=SlimView.FromString,
        )

    async def submit(self, game_id: str, act: Any, seat: int) -> Any:
        SlimRules.calls += 1
        rid = new_request_id()
        req = rules_pb2.SubmitActionRequest(game_id=game_id, request_id=rid, action=act, seat=seat)
        return await self.client._call(self._submit, req, self._retry_move, rid)  # noqa: SLF001 - its retries

    async def get_view(self, game_id: str, seat: int) -> Any:
        SlimRules.calls += 1
        return await self.client._call(
            self._view,
            rules_pb2.GetViewRequest(game_id=game_id, seat=seat),  # noqa: SLF001
            self._retry_read,
        )
