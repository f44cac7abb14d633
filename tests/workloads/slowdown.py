"""A real PyTorch training job whose chosen operator gets slower when a file appears.

An MLP on random data, SGD, plus one ``torch.sort`` per step (``aten::sort``): while ``--slow-file``
exists, the sort works on ``--factor`` times more data — the operator slows down, nothing else does.
Prints ``ready pid=N`` after the first step, ``slow from step S`` at the first step it saw the file
(and ``fast from step S`` when it is gone), and trains until its stdin closes.
"""

import argparse
import os
import sys
import threading
import time

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--slow-file", required=True, help="while this file exists, aten::sort is slower")
parser.add_argument("--factor", type=int, default=8, help="how much more data the slow sort works on")
parser.add_argument("--sort-size", type=int, default=20_000)
parser.add_argument("--step-ms", type=float, default=20.0)
args = parser.parse_args()

stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()

torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(256, 64), torch.randn(256, 1)
fast, slow = torch.randn(args.sort_size), torch.randn(args.sort_size * args.factor)

was_slow = False
step = 0
while not stop.is_set():
    begin = time.monotonic()
    is_slow = os.path.exists(args.slow_file)
    if is_slow != was_slow:
        print(f"{'slow' if is_slow else 'fast'} from step {step}", flush=True)
        was_slow = is_slow
    torch.sort(slow if is_slow else fast)
    optimizer.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    optimizer.step()
    if step == 0:
        print(f"ready pid={os.getpid()}", flush=True)
    step += 1
    stop.wait(max(0.0, args.step_ms / 1000 - (time.monotonic() - begin)))
print(f"done steps={step}", flush=True)
