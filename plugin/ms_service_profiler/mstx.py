"""``ms_service_profiler.mstx``: ``service_profiler``, the C library's entry points, over this plugin."""

from msmonitor_plugin.service_profiler.mstx import service_profiler

__all__ = ["service_profiler"]
