"""The rules service: authoritative game state, legality and per-seat views over gRPC.

Stateless: state lives in NATS JetStream (court_rules.store); any replica serves
any game (court_rules.games); events are published from the state log, which
is their outbox (court_rules.outbox). Entry point: ``court-rules``
(court_rules.app).
"""
