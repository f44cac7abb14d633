"""msMonitor's ``IPCMonitor`` module, as torch_npu and MindSpore import it:

    from IPCMonitor import PyDynamicMonitorProxy

backed by msmonitor_plugin (this distribution replaces the C++ ``mindstudio_monitor`` wheel).
"""

from msmonitor_plugin.msmonitor_proxy import PyDynamicMonitorProxy

__all__ = ["PyDynamicMonitorProxy"]
