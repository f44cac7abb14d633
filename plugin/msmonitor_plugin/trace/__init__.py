"""Traces of chosen steps, run in the process at step boundaries (nputrace and gputrace)."""
