"""Which daemons a command talks to: one (:mod:`.target`), or many at once (:mod:`.hosts`: Slurm
hostlists, host files, ``--slurm-job``; :mod:`.fanout`: every host asked in parallel, one table)."""
