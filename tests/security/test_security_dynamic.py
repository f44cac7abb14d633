"""`dyno dynamic` under mutual TLS: the hold is in the certificate's name; read-only clients get none."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Callable, Dict

import certs_factory as cf
from conftest import Authority, Dirs
from dynocerts.policy import Role
from harness import Daemon, Dyno, read_line_until, stop_process, wait_until


def test_the_hold_names_the_certificate_and_read_only_clients_are_refused(
    start_daemon: Callable[..., Daemon], start_workload, dirs: Dirs, authority: Authority, tmp_path: Path
) -> None:
    d = start_daemon("--certs-dir", str(dirs.server), "--read-only-clients", "bob")
    carol = cf.certs_dir(
        tmp_path / "carol", Role.CLIENT, authority.ca, cf.leaf(authority.ca, Role.CLIENT, "carol")
    )

    def dyno(certs: Path) -> Dyno:
        return Dyno(("--port", str(d.port), "--certs-dir", str(certs), "--json"))

    def processes() -> Dict[int, str]:
        listed = dyno(dirs.alice)("processes", expect=0)
        return {p["pid"]: p["held_by"] for p in json.loads(listed.stdout)}

    job = start_workload("idle.py", d.client_env(), "--init")
    wait_until(lambda: job.pid in processes(), what="registration")
    attach = ["dynamic", "--pid", str(job.pid), "--output", str(tmp_path)]
    alice = subprocess.Popen(
        dyno(dirs.alice).command(*attach), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert json.loads(read_line_until(alice, "{"))["ok"]
        assert processes()[job.pid].startswith("'alice' (certificate), dyno pid ")

        second = dyno(carol)(*attach, input="quit\n")
        assert second.returncode == 1
        assert "held by 'alice' (certificate)" in json.loads(second.stdout.splitlines()[0])["message"]

        viewer = dyno(dirs.bob)(*attach, input="quit\n")
        assert viewer.returncode == 1
        assert "PERMISSION_DENIED" in viewer.stderr and "read-only" in viewer.stderr, viewer.stderr
    finally:
        stop_process(alice)
