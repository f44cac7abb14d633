"""A small CPU training loop that runs the plugin's Monitor on itself and prints what it reports.

Usage: monitor_loop.py KEY=VALUE... (npu-monitor config keys). Prints ``report <json>`` per report and
``stopped <reason>`` when the monitor stops (DURATION), then exits. It imports torch itself first: the
plugin never imports torch.
"""

import json
import sys
import threading

import torch

from msmonitor_plugin.monitor import Monitor, MonitorConfig, Report

torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(256, 64), torch.randn(256, 1)
stopped = threading.Event()


def on_report(report: Report) -> None:
    print("report " + report.to_json(), flush=True)


def on_stopped(reason: str) -> None:
    print(f"stopped {reason}", flush=True)
    stopped.set()


config = MonitorConfig.parse(dict(arg.split("=", 1) for arg in sys.argv[1:]))
monitor = Monitor(rank=0, on_report=on_report, on_stopped=on_stopped)
result = monitor.apply(config)
print(f"started backend={result.backend} unavailable={json.dumps(result.unavailable)}", flush=True)
while not stopped.is_set():
    with torch.profiler.record_function("train_step"):
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
