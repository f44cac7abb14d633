"""npu-monitor's reports after they arrive: aggregated per window (:mod:`.metrics`) and written to the
sinks (:mod:`.sinks`: TensorBoard, Prometheus, JSONL)."""
