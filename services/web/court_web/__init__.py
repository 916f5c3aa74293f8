"""court-web: the stateless Connect and gRPC-Web edge for browsers (docs/web.md).

It serves the public client methods of the rules, lobby, ranking and bot services over the Connect
protocol and gRPC-Web (handlers generated from protos/ by protoc-gen-connectrpc, in
``court_proto``), forwards each call over gRPC with the caller's own bearer token, and serves the
web client's built files (``web/dist``). It holds no key and no state.
"""
