"""STAND-IN for torch_npu's device profiler (``torch_npu.profiler.profile``): on Ascend it collects
CANN and framework data; here it counts the steps it was active for and, when it stops, writes the
``*_ascend_pt`` folder the real one writes, with the steps and the options it was given (as torch_npu's
dynamic profiler parsed them from the daemon's config) in ``profiler_info.json``."""

import json
import os
import socket
import time
from typing import Any, Callable, Dict, List, Optional

Handler = Callable[["profile"], None]


def tensorboard_trace_handler(
    dir_name: str, worker_name: Optional[str] = None, analyse_flag: bool = True, async_mode: bool = False
) -> Handler:
    def handler(prof: "profile") -> None:
        name = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        folder = os.path.join(dir_name, f"{name}_{int(time.time() * 1000)}_ascend_pt")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "profiler_info.json"), "w") as f:
            json.dump({"steps": prof.steps, "options": prof.options, "metadata": prof.metadata}, f)

    return handler


class profile:
    def __init__(
        self,
        activities: Optional[List[Any]] = None,
        schedule: Optional[Any] = None,
        on_trace_ready: Optional[Handler] = None,
        **options: Any,
    ) -> None:
        self.on_trace_ready = on_trace_ready
        self.options = {k: v for k, v in options.items() if isinstance(v, (bool, int, str))}
        self.offset = 0
        self.step_num = 0
        self.steps: List[int] = []
        self.metadata: Dict[str, Any] = {}

    def _set_step_num_offset_for_dynamic_prof(self, offset: int) -> None:
        self.offset = offset

    def start(self) -> None:
        self.steps.append(self.offset)

    def step(self) -> None:
        self.step_num += 1
        self.steps.append(self.offset + self.step_num)

    def stop(self) -> None:
        self.steps.pop()  # the step that stop() ends was never run under the profiler
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    def add_metadata_json(self, key: str, value: Any) -> None:
        self.metadata[key] = value
