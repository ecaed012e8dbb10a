"""Protobuf stubs of gdn.v1, generated from proto/gdn/v1/gdn.proto when the
package is built (setup.py); never committed.

    gdn_pb2       the messages (used by gdn_serve)
    gdn_pb2_grpc  the generated service stub, for callers who want it (it
                  requires grpcio at least as new as the grpcio-tools that
                  built the package)
"""

try:
    from . import gdn_pb2  # noqa: F401
except ImportError as e:  # pragma: no cover - only in a source tree that was never built
    raise ImportError(
        "gdn_serve's protobuf stubs are missing: install the package "
        "(pip install ./client/python) instead of importing it from its source tree") from e
