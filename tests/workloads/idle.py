"""A Python process with no framework: optionally calls msmonitor_plugin.init(); runs until stdin closes."""

import os
import sys

if "--init" in sys.argv:
    import msmonitor_plugin

    msmonitor_plugin.init()
print(f"ready pid={os.getpid()}", flush=True)
sys.stdin.read()
