"""dynoproto: the gRPC contract of dynolog (``dynolog.proto``) and its generated stubs."""

from . import dynolog_pb2, dynolog_pb2_grpc

API = "dynolog.v1"
SERVICE = "dynolog.v1.Dynolog"

__all__ = ["API", "SERVICE", "dynolog_pb2", "dynolog_pb2_grpc"]
