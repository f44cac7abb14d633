"""dyno: the command line of msMonitor; talks to dynolog daemons over gRPC."""

import os

# gRPC's core logs failed TLS handshakes to stderr on its own; dyno explains them in one message
# instead (connection.transport_failure). Set before anything imports grpc; GRPC_VERBOSITY still wins.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

from msmonitor_contract import __version__

__all__ = ["__version__"]
