"""The games' contract: the typed wire forms of what the engines (``court_games``) speak in JSON, on
the messages generated from protos/ (``court_proto``).

* ``typed``: the typed game messages (``court.games.v1``: events, views, options, results) to and
  from the engines' JSON forms
* ``records``: game records, contract v2 (``court.events.v2.Record``): subjects, shards, encoding,
  redaction
* ``actions``: typed actions (``court.rules.v1.Action``) to and from the canonical JSON

It sits above the engines and the generated messages and may use the service plumbing
(``court_kit``); nothing below imports it (tests/test_import_cycles.py checks the layers).
"""
