"""msmonitor_contract: what the plugin, the daemon and ``dyno`` agree on, defined once.

The IPC bytes (:mod:`.wire`), the words (:mod:`.vocabulary`: command kinds, states, phases, reasons,
defaults), the ``KEY=VALUE`` config text (:mod:`.configtext`), the monitor's reports (:mod:`.report`,
:mod:`.activity`), a process's pid chain (:mod:`.pids`) and the service profiler's tables
(:mod:`.service_tables`). Standard library only, Python >= 3.8, and importing it starts nothing: no
logging set-up, no threads, no step hooks. It ships in the plugin's distribution, so the plugin stays
installable alone; the daemon and ``dyno`` import the plugin's distribution through this package only.
"""

from ._version import __version__

__all__ = ["__version__"]
