"""Stands in for torch_npu's (or MindSpore's) dynamic profiler in dyno mode, for contract tests.

It makes the calls those frameworks make on ``IPCMonitor.PyDynamicMonitorProxy``, in their order and
on their cadence (reference/msmonitor.md §1.6 and §8): a forked helper process calls ``init_dyno`` once
and ``poll_dyno`` in a loop, parsing ``KEY=VALUE`` lines the way torch_npu does (a value containing
``=`` is dropped); the training process applies npu-monitor configs with ``enable_dyno_npu_monitor``
and reports its trace state with ``update_profiler_status``. It profiles nothing: at the end of a
"trace" it creates the output folder the framework would, so the lifecycle can be followed.

    python framework_dyno.py torch_npu|mindspore      # runs until stdin closes
"""

import json
import multiprocessing
import os
import socket
import sys
import threading
import time
import types

FLAVOUR = sys.argv[1]
# What the daemon sees in such a job: the framework's module is imported (this process plays its part).
sys.modules.setdefault(FLAVOUR, types.ModuleType(FLAVOUR))
# The .pth hook starts the plugin when a real framework's import finishes; this stand-in imports none.
import msmonitor_plugin  # noqa: E402

msmonitor_plugin.init()

from IPCMonitor import PyDynamicMonitorProxy  # noqa: E402

POLL_S = 0.2  # torch_npu polls every 2 s (then every step time); faster here so tests are quick
STEP_S = 0.02


def parse(text):
    """torch_npu's parser: split each line on '=', keep it only when that gives exactly two parts."""
    values = {}
    for line in text.split("\n"):
        parts = line.split("=")
        if len(parts) == 2:
            values[parts[0].strip()] = parts[1].strip()
    return values


def helper(queue, rank):
    proxy = PyDynamicMonitorProxy()
    queue.put(("init", proxy.init_dyno(rank)))
    while True:
        text = proxy.poll_dyno()
        if text:
            queue.put(("config", parse(text)))
        time.sleep(POLL_S)


def status(proxy, value, step=0, start=0, stop=0):
    proxy.update_profiler_status(
        {
            "profiler_status": str(value),
            "current_step": str(step),
            "start_step": str(start),
            "stop_step": str(stop),
        }
    )


def main():
    rank = int(os.environ.get("RANK", "0"))
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    context.Process(target=helper, args=(queue, rank), daemon=True).start()
    proxy = PyDynamicMonitorProxy()
    stop_event = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop_event.set()), daemon=True).start()
    print(f"ready pid={os.getpid()}", flush=True)
    plan = None
    step = 0
    while not stop_event.wait(STEP_S):
        step += 1
        while not queue.empty():
            kind, payload = queue.get()
            print(f"{kind} {json.dumps(payload)}", flush=True)
            if kind != "config":
                continue
            if "NPU_MONITOR_START" in payload:
                proxy.enable_dyno_npu_monitor(payload)
                continue
            start = int(payload["PROFILE_START_STEP"])
            start = step + 1 if start < 0 else start
            plan = (start, start + int(payload["ACTIVITIES_ITERATIONS"]), payload["ACTIVITIES_LOG_FILE"])
            if FLAVOUR == "torch_npu":  # MindSpore has no Ready state
                status(proxy, 2, step, plan[0], plan[1])
        if plan and step == plan[0]:
            status(proxy, 1, step, plan[0], plan[1])
        if plan and step == plan[1]:
            start, stop, log_dir = plan
            name = (
                f"{socket.gethostname()}_{os.getpid()}_{time.strftime('%Y%m%d%H%M%S')}000_ascend_pt"
                if FLAVOUR == "torch_npu"
                else f"rank{rank}_start{start}_stop{stop - 1}"
            )
            os.makedirs(os.path.join(log_dir, name))
            status(proxy, 0, step)
            plan = None
    if FLAVOUR == "mindspore":
        status(proxy, -1)  # MindSpore's monitor process reports Uninitialized when it leaves
    proxy.finalize_dyno()


main()
