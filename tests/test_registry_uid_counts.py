"""The registry's count of registered processes per uid, which ``--max-ipc-clients``'s share per uid
reads on every new registration: kept as processes come and go, framework helpers included, so that it
always sums to what the cap in all counts."""

from __future__ import annotations

import os
import signal
import time

from dynolog.core.registry import ClientKind, Registry
from dynolog.ipc.endpoint import Sender

JOB_UID, OTHER_UID = 1000, 65534


def by_uid(registry: Registry) -> tuple:
    return registry.registered_by(JOB_UID), registry.registered_by(OTHER_UID), registry.registered


def test_per_uid_counts_follow_jobs_helpers_exits_and_expiry() -> None:
    registry = Registry(keepalive_s=60.0)
    job = os.getpid()
    helper = os.fork()  # forked, not exec'd: the same command line, so it folds into this job's record
    if helper == 0:
        time.sleep(60)
        os._exit(0)
    try:
        registry.touch(Sender(b"\0job", job, JOB_UID), job, ClientKind.PLUGIN)
        registry.touch(Sender(b"\0helper", helper, JOB_UID), helper, ClientKind.MSMONITOR)
        assert registry.is_helper(helper)
        registry.touch(Sender(b"\0other", 1, OTHER_UID), 1, ClientKind.PLUGIN)
        assert by_uid(registry) == (2, 1, 3)
        registry.exited(helper)  # a helper leaves its job's record
        assert by_uid(registry) == (1, 1, 2)
        registry.touch(Sender(b"\0helper", helper, JOB_UID), helper, ClientKind.MSMONITOR)
        registry.exited(job)  # the job goes, and its helper with it
        assert by_uid(registry) == (0, 1, 1)
        registry.expire(now=time.monotonic() + 3600)  # not heard from within the keep-alive
        assert by_uid(registry) == (0, 0, 0)
    finally:
        os.kill(helper, signal.SIGKILL)
        os.waitpid(helper, 0)
