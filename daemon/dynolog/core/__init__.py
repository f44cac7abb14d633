"""The daemon's core, which neither wire nor process kind shapes: the registry of processes, the command
pipeline (admission, targeting, delivery), the trace store, and the small helpers they share."""
