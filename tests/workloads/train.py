"""A small real PyTorch training job: an MLP on random data, SGD, one optimizer step per step.

Prints ``ready pid=N`` once torch is imported and the first step ran, then trains until its stdin
closes (the test's way to stop it). ``--step-ms`` pads each step to about that long.
``--import MODULE`` imports a framework extension after torch, as a user's script does
(``import torch_npu``). ``--process-group URL`` first joins a gloo process group there (``file://…``;
RANK and WORLD_SIZE from the environment); with ``--all-reduce`` each step then all-reduces the loss,
and a stop told to any rank stops every rank after the same step (none waits for a peer gone), and
the ranks pad their steps to the same instants, multiples of ``--step-ms`` on the wall clock: each step
begins on every rank together, whatever delayed one rank before (a trace's start, a starved core), so a
rank slowed makes the others wait in the all-reduce, as in a job with no slack. Padded each from its own
start, the ranks would keep whatever offset they drifted to, and which rank waits would be chance.
``--report-steps FILE`` writes, on the way out, each step's wall-clock start and the time its work took
(the padding excluded) as JSON, for benchmarks; without it nothing is recorded.
``--slow-file FILE`` adds one ``torch.sort`` (``aten::sort``) of ``--sort-size`` numbers to each step,
on ``--slow-factor`` times more numbers while FILE exists: this process slows from outside, by a file
anyone can touch, and says so (``slow from step S``, ``fast from step S``); without it, no sort.
"""

import argparse
import importlib
import json
import os
import sys
import threading
import time

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--step-ms", type=float, default=20.0)
parser.add_argument("--max-steps", type=int, default=1_000_000)
parser.add_argument("--report-steps", metavar="FILE", help="write per-step times here on exit (JSON)")
parser.add_argument("--ignore-stdin", action="store_true", help="run --max-steps; stdin is not the signal")
parser.add_argument(
    "--resource-tracker", action="store_true", help="start multiprocessing's resource tracker (a helper)"
)
parser.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE")
parser.add_argument("--process-group", metavar="URL", help="join torch.distributed's gloo group at URL first")
parser.add_argument(
    "--all-reduce", action="store_true", help="all-reduce the loss each step (with --process-group)"
)
parser.add_argument(
    "--slow-file", metavar="FILE", help="a sort each step, --slow-factor x bigger while FILE exists"
)
parser.add_argument("--slow-factor", type=int, default=16, help="how many times more the slow sort sorts")
parser.add_argument("--sort-size", type=int, default=20_000, help="numbers the sort sorts when not slow")
args = parser.parse_args()
if args.process_group:  # RANK and WORLD_SIZE from the environment; returns once every rank joined
    import torch.distributed

    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.distributed.init_process_group(
        "gloo", init_method=args.process_group, rank=rank, world_size=world_size
    )
for module in args.imports:
    importlib.import_module(module)
if args.resource_tracker:  # as MindSpore does: a spawn-context semaphore starts the tracker process
    import multiprocessing

    tracked = multiprocessing.get_context("spawn").Lock()

stop = threading.Event()
if not args.ignore_stdin:
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()

torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(256, 64), torch.randn(256, 1)
if args.slow_file:
    fast, slow = torch.randn(args.sort_size), torch.randn(args.sort_size * args.slow_factor)
was_slow = False


def sort_step(step: int) -> None:
    """The --slow-file operator: sorts the slow data while the file exists, saying when that changes."""
    global was_slow
    is_slow = os.path.exists(args.slow_file)
    if is_slow != was_slow:
        print(f"{'slow' if is_slow else 'fast'} from step {step}", flush=True)
        was_slow = is_slow
    torch.sort(slow if is_slow else fast)


def train_step() -> None:
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    if args.all_reduce:  # the loss, and whether any rank was told to stop
        shared = torch.stack([loss.detach(), torch.tensor(float(stop.is_set()))])
        torch.distributed.all_reduce(shared)
        if shared[1] > 0:
            stop.set()


def pad_s(begin: float) -> float:
    """How long to wait so that the next step begins on time (the module's docstring says when)."""
    step_s = args.step_ms / 1000
    if args.all_reduce and step_s > 0:
        return step_s - time.time() % step_s
    return max(0.0, step_s - (time.monotonic() - begin))


# (wall-clock start in s, work in s) per step, only when asked for.
record = [] if args.report_steps else None
for step in range(args.max_steps):
    begin = time.monotonic()
    if record is not None:
        started = time.time()
    if args.slow_file:
        sort_step(step)
    train_step()
    if record is not None:
        record.append((started, time.monotonic() - begin))
    if step == 0:
        print(f"ready pid={os.getpid()}", flush=True)
    if stop.is_set():
        break
    # Pad to the requested step time; the wait also returns at once when the test says stop.
    stop.wait(pad_s(begin))
if record is not None:
    with open(args.report_steps, "w") as f:
        json.dump({"step_ms": args.step_ms, "steps": [{"t": t, "work_s": w} for t, w in record]}, f)
print(f"done steps={step + 1}", flush=True)
