"""One module per command kind: its :class:`~dynolog.pipeline.Policy`."""
