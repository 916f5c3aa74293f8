"""Generated protobuf and gRPC code for Court's contracts (source: protos/).

Built by ``make proto`` (protos/generate.py); never edit by hand. Import e.g.
``from court_proto.court.rules.v1 import rules_pb2, rules_pb2_grpc``.
"""
