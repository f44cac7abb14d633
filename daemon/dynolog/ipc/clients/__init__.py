"""One adapter per kind of client a process may have: this project's plugin (pushes and events),
stock Kineto (polls), msMonitor's contract (polls and status structs)."""
