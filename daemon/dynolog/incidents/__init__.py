"""npu-monitor's ``--auto-trace``: a slowdown (or a straggler rank) detected in the reports is traced at once.

The reports are watched (:mod:`.watch`) and judged (:mod:`.detector`, against :mod:`.baseline`); what
is raised becomes an :class:`~.incident.Incident`, stored (:mod:`.store`) and traced (:mod:`.actions`).
Nothing is imported here, so that the detector's settings can be read (as the daemon's flags do)
without the machinery that acts on them.
"""
