"""A Python process with no framework: optionally calls msmonitor_plugin.init(); runs until stdin closes.

With ``--leave``, the first line on stdin makes it call ``msmonitor_plugin.shutdown()`` (the goodbye) and
print ``left``; it keeps running until stdin closes.
"""

import os
import sys

if "--init" in sys.argv:
    import msmonitor_plugin

    msmonitor_plugin.init()
print(f"ready pid={os.getpid()}", flush=True)
if "--leave" in sys.argv:
    sys.stdin.readline()
    import msmonitor_plugin

    msmonitor_plugin.shutdown()
    print("left", flush=True)
sys.stdin.read()
