"""An inference-service stand-in instrumented as MindIE services are: ``from ms_service_profiler import
Profiler, Level``. Real threads serve real requests from a queue: each is received (event ``httpReq``),
run (span ``forward`` in domain ``ModelExecute``, then ``prof_step()``: a step for ``profiler_step_num``)
and answered (event ``httpRes`` with token metrics). Prints ``ready pid=N`` once serving; serves until
stdin closes. Prints ``served N`` after every 50 requests answered. ``--torch`` runs a small torch model in
``forward``; ``--rate`` is requests per second (default 200).
"""

import argparse
import itertools
import os
import queue
import sys
import threading

from ms_service_profiler import Level, Profiler
from ms_service_profiler.profiler import prof_step

parser = argparse.ArgumentParser()
parser.add_argument("--rate", type=float, default=200.0)
parser.add_argument("--workers", type=int, default=2)
parser.add_argument("--torch", action="store_true")
args = parser.parse_args()

if args.torch:
    import torch

    torch.set_num_threads(1)
    model = torch.nn.Linear(32, 32)

    def compute(_: int) -> None:
        with torch.no_grad():
            model(torch.randn(4, 32))
else:

    def compute(n: int) -> None:
        sum(i * i for i in range(200 + n % 50))


stop = threading.Event()
requests: "queue.Queue[str]" = queue.Queue()
served = itertools.count(1)


def serve() -> None:
    while not stop.is_set():
        try:
            rid = requests.get(timeout=0.05)
        except queue.Empty:
            continue
        Profiler(Level.INFO).domain("Request").res(rid).metric("recvTokenSize", 16).event("httpReq")
        with Profiler(Level.INFO).domain("ModelExecute").res(rid).attr("batch", 1).span_start("forward"):
            compute(len(rid))
        prof_step()
        Profiler(Level.INFO).domain("Request").res(rid).metric("replyTokenSize", 8).event("httpRes")
        n = next(served)
        if n % 50 == 0:
            print(f"served {n}", flush=True)


workers = [threading.Thread(target=serve, daemon=True) for _ in range(args.workers)]
for w in workers:
    w.start()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
print(f"ready pid={os.getpid()}", flush=True)
for n in itertools.count():
    if stop.wait(1.0 / args.rate):
        break
    requests.put(f"req-{os.getpid()}-{n}")
for w in workers:
    w.join()
