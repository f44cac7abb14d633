"""A trace from start to files: started on one host or many (:mod:`.start`, ``--sync``), followed and
shown (:mod:`.progress`), its files fetched and laid out (:mod:`.collect`)."""
