"""An inference-server stand-in: real torch work on a loop that never marks a step (no optimizer, no
``msmonitor_plugin.step()``). Prints ``ready pid=N`` after the first request; serves until stdin closes."""

import os
import sys
import threading

import torch

torch.set_num_threads(1)
model = torch.nn.Linear(64, 64)
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
first = True
while not stop.is_set():
    with torch.no_grad():
        model(torch.randn(32, 64))
    if first:
        print(f"ready pid={os.getpid()}", flush=True)
        first = False
    stop.wait(0.002)
