"""Hypothesis profiles for the fuzz tests.

``fuzz`` (the default) is derandomized and keeps no example database: every run, in CI or not, tries the
same examples, so a failure reproduces from the seed-free test id alone and the folder's runtime is
predictable on a loaded two-core machine. ``explore`` is for hunting: random, many more examples, with
the database, e.g. ``HYPOTHESIS_PROFILE=explore pytest tests/fuzz``.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "fuzz",
    derandomize=True,
    database=None,
    # Wall-clock deadlines fail at random on shared cores; hangs are caught by pytest-timeout instead.
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.register_profile(
    "explore",
    parent=settings.get_profile("fuzz"),
    derandomize=False,
    database=settings.default.database,
    max_examples=2000,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "fuzz"))
