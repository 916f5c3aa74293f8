"""Which methods the edge serves: the public client API, decided from the protos' comments and
the servicers' role checks (docs/web.md has the table and the reasons).

Everything else (admin-only, service-only) is not exposed at all: the edge answers it exactly like
a method that does not exist (HTTP 404, Connect ``unimplemented``), so a browser cannot even learn
whether the upstream would have refused it.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from court_proto.court.bot.v1 import bot_connect, bot_pb2
from court_proto.court.lobby.v1 import lobby_connect, lobby_pb2
from court_proto.court.ranking.v1 import ranking_connect, ranking_pb2
from court_proto.court.rules.v1 import rules_connect, rules_pb2
from google.protobuf.descriptor import ServiceDescriptor


@dataclass(frozen=True)
class Upstream:
    """One upstream gRPC service the edge forwards to."""

    key: str  # rules | lobby | ranking | bot: its address setting is COURT_<KEY>_ADDR
    descriptor: ServiceDescriptor
    connect: ModuleType  # the generated *_connect module
    public: frozenset[str]  # the method names served

    @property
    def full_name(self) -> str:
        return str(self.descriptor.full_name)

    @property
    def asgi_class(self) -> type:
        return getattr(self.connect, f"{self.descriptor.name}ASGIApplication")  # type: ignore[no-any-return]

    def path(self, method: str) -> str:
        return f"/{self.full_name}/{method}"


UPSTREAMS = (
    Upstream(
        "rules",
        rules_pb2.DESCRIPTOR.services_by_name["RulesService"],
        rules_connect,
        # not GetHistory (admin and analytics: the full-information history, seed included) nor
        # CloseGame (the lobby's service role)
        frozenset(
            {
                "CreateGame",
                "GetView",
                "ListLegalActions",
                "SubmitAction",
                "WatchGame",
                "ReturnToSeat",
                "LeaveSeat",
            }
        ),
    ),
    Upstream(
        "lobby",
        lobby_pb2.DESCRIPTOR.services_by_name["LobbyService"],
        lobby_connect,
        # every lobby method is a player's own (the lobby checks who may do what)
        frozenset(m.name for m in lobby_pb2.DESCRIPTOR.services_by_name["LobbyService"].methods),
    ),
    Upstream(
        "ranking",
        ranking_pb2.DESCRIPTOR.services_by_name["RankingService"],
        ranking_connect,
        # not RegisterGame, AbandonGame (lobby only), Audit (admin only) nor GetRatings (the
        # lobby's quick match; a player reads ratings through GetProfile)
        frozenset({"GetBalance", "GetHistory", "GetProfile", "GetLeaderboard", "GetChallenges"}),
    ),
    Upstream(
        "bot",
        bot_pb2.DESCRIPTOR.services_by_name["BotService"],
        bot_connect,
        frozenset({"Suggest"}),
    ),
)

# "/court.rules.v1.RulesService/GetView" -> its upstream
PUBLIC: dict[str, Upstream] = {up.path(m): up for up in UPSTREAMS for m in sorted(up.public)}


def hidden_methods() -> list[str]:
    """The upstream methods the edge does not serve (tests, docs)."""
    return [up.path(m.name) for up in UPSTREAMS for m in up.descriptor.methods if m.name not in up.public]
