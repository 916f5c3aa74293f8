"""Protobuf's wire format, for messages the service writes as bytes from parts it has serialized
already (``court_rules.views``: answers and updates; ``court_rules.store``: a game's archive)."""

from __future__ import annotations

from court_kit.structs import field

__all__ = ["field"]
