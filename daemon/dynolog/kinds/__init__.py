"""One module per command kind: its :class:`~dynolog.commands.Policy`."""
