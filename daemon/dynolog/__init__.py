"""dynolog: the per-node daemon of msMonitor (gRPC for `dyno`, local IPC for the processes)."""

from msmonitor_contract import __version__

__all__ = ["__version__"]
