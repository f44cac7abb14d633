"""dyno: the command line of msMonitor; talks to dynolog daemons over gRPC."""

from msmonitor_plugin import __version__

__all__ = ["__version__"]
