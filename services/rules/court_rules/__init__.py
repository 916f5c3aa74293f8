"""The rules service: authoritative game state, legality and per-seat views over gRPC.

Stateless: state lives in NATS JetStream (court_rules.store); any replica serves
any game (court_rules.games); each accepted move is one append to the game's log,
the full record (court_contract.records), which the projector (court_rules.projector)
republishes in public form. Entry points: ``court-rules`` (court_rules.app) and
``court-projector``.
"""
