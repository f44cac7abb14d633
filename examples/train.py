"""A small real PyTorch training job for the demo: an MLP on random data, about 20 ms a step.

Nothing in it knows about msMonitor: MSMONITOR_USE_DAEMON=1 in its environment is enough.
It runs until its standard input closes (or --steps are done).
"""

import argparse
import sys
import threading

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=100_000)
args = parser.parse_args()

stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()

model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(512, 64), torch.randn(512, 1)
print("training", flush=True)
for _step in range(args.steps):
    with torch.profiler.record_function("forward"):
        loss = torch.nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if stop.wait(0.015):
        break
