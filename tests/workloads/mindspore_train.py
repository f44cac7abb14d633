"""A small MindSpore network trained on CPU, with MindSpore's own dynamic profiler in dyno mode.

Run with the MindSpore peer's python (tests/peers.py) and ``MSMONITOR_USE_DAEMON=1``: constructing
``DynamicProfilerMonitor`` forks MindSpore's monitor helper (``worker_dyno_func``), which drives
``IPCMonitor.PyDynamicMonitorProxy``; ``step()`` after every training step applies what the helper
received and reports the trace state. Nothing here stands in for MindSpore.

    python mindspore_train.py      # trains until stdin closes

Prints ``ready pid=N helper=H shm=NAME`` once the helper is forked. ``helper=0`` means MindSpore did
not fork one: its shared memory (named by the hour) already existed, left by a killed job of this hour,
and MindSpore then takes this process for a second rank of that job.
"""

import os
import sys
import threading
import time

import mindspore as ms
import numpy as np
from mindspore import nn
from mindspore.profiler import DynamicProfilerMonitor

# Short steps at a steady pace: the test chooses a start step a few seconds ahead of the current one
# (MindSpore reports its step at most once a second), and MindSpore's profiler needs steps to happen.
STEP_S = 0.05


def main() -> None:
    ms.set_device("CPU")
    net = nn.SequentialCell(nn.Dense(16, 32), nn.ReLU(), nn.Dense(32, 4))
    loss_fn = nn.MSELoss()
    optimizer = nn.SGD(net.trainable_params(), learning_rate=0.01)
    grad_fn = ms.value_and_grad(lambda x, y: loss_fn(net(x), y), None, optimizer.parameters)
    rng = np.random.default_rng(0)
    x = ms.Tensor(rng.random((8, 16), dtype=np.float32))
    y = ms.Tensor(rng.random((8, 4), dtype=np.float32))

    monitor = DynamicProfilerMonitor()
    helper = monitor._process.pid if monitor._process is not None else 0
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    print(f"ready pid={os.getpid()} helper={helper} shm={monitor._shm_name}", flush=True)

    step = 0
    next_step = time.monotonic()
    while not stop.is_set():
        loss, grads = grad_fn(x, y)
        optimizer(grads)
        monitor.step()
        step += 1
        if step % 100 == 0:
            print(f"step {step} loss {float(loss):.4f}", flush=True)
        next_step += STEP_S
        stop.wait(max(0.0, next_step - time.monotonic()))
    print(f"done steps={step}", flush=True)
    # MindSpore's atexit handler stops the helper (it reports Uninitialized) and removes the memory.


main()
