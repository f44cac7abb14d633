"""A small real PyTorch training job: an MLP on random data, about 20 ms a step.

Nothing in it knows about msMonitor: MSMONITOR_USE_DAEMON=1 in its environment is enough.

    MSMONITOR_USE_DAEMON=1 python examples/train.py &      # trains until stopped (kill %1, or Ctrl-C)
    python examples/train.py --steps 500                   # or for so many steps

It never reads its standard input, so it runs the same in the background of a terminal, in a script,
and launched by ``dyno dynamic -- python examples/train.py`` (which keeps stdin for its prompt).
"""

import argparse
import signal
import sys
import time

import torch

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--steps", type=int, default=0, help="stop after this many steps (0: until stopped)")
args = parser.parse_args()
# SIGTERM (kill, a launcher, a scheduler's stop) ends the job as Ctrl-C does: between two steps.
signal.signal(signal.SIGTERM, signal.default_int_handler)

model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(512, 64), torch.randn(512, 1)
print("training", flush=True)
step = 0
try:
    while not args.steps or step < args.steps:
        with torch.profiler.record_function("forward"):
            loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        time.sleep(0.015)  # a demo's pace: a few dozen steps a second
except KeyboardInterrupt:
    pass
print(f"stopped after {step} steps", file=sys.stderr, flush=True)
