"""Service plumbing every Court service shares.

* ``settings``: typed settings from the ``COURT_`` environment
* ``logging``: one structlog setup (JSON lines; request and game ids bound)
* ``tokens``: HS256 bearer tokens (``court-token`` issues development ones)
* ``errors``: domain errors and the single mapping to gRPC status codes
* ``server``: ``create_server``, health and reflection, the edge interceptor
  (auth, request ids, metrics, error mapping), graceful shutdown
* ``metrics``: Prometheus series and the /metrics endpoint
* ``jetstream``: connect (reconnecting forever), ensure streams/KV, direct get
* ``structs``: Structs to and from JSON
* ``checks``: client input in error messages, page tokens
* ``loops``: what background loops share (``rest``: a pause a stop cuts short)

Plumbing only: the games' typed wire forms (views, records, actions) are ``court_contract``'s,
which sits above this package and the engines; nothing here imports either.
"""
