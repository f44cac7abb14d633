"""Which hosts a fan-out reaches: Slurm hostlists, host files, a Slurm job's nodes (through a stand-in
``scontrol``), and the errors a user meets when one of them cannot be read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List

import pytest

from dyno.exits import EXIT_USAGE, CliError
from dyno.fleet import hosts
from harness import dyno

SLURM_STAND_IN = Path(__file__).resolve().parent / "stand_ins" / "slurm"


def usage_error(call, *args) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(CliError) as raised:
        call(*args)
    assert raised.value.exit_code == EXIT_USAGE
    return str(raised.value)


@pytest.fixture
def slurm(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """Slurm's scontrol (the stand-in) on PATH, knowing the jobs given to the returned function."""
    monkeypatch.setenv("PATH", f"{SLURM_STAND_IN}:/usr/bin:/bin")

    def jobs(table: Dict[str, List[str]]) -> None:
        monkeypatch.setenv("STAND_IN_SLURM_JOBS", json.dumps(table))

    return jobs


def test_hostlists_expand_as_slurm_writes_them():
    assert hosts.expand("node[001-003,010],login", "--hosts") == [
        *("node001", "node002", "node003", "node010", "login")
    ]
    assert hosts.expand("rack[1-2]-n[1-2]", "--hosts") == ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]
    assert hosts.expand("127.0.0.[2-4]", "--hosts") == ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
    assert hosts.as_hostlist(["node003", "node001", "node002", "login"]) == "login,node[001-003]"


def test_a_bad_hostlist_is_a_usage_error_that_shows_the_syntax():
    message = usage_error(hosts.expand, "node[3-1]", "--hosts")
    assert message.startswith("--hosts: 'node[3-1]' is not a hostlist")
    assert "'node[001-016]'" in message


def test_hostfile_one_per_line_with_comments_blank_lines_and_hostlists(tmp_path: Path):
    hostfile = tmp_path / "hosts.txt"
    hostfile.write_text("# rack 1\nnode01\n\n  node02   # the slow one\nnode[10-11]\n#node99\n")
    assert hosts.read_hostfile(str(hostfile)) == ["node01", "node02", "node10", "node11"]


def test_hostfile_errors_name_the_file_and_line(tmp_path: Path):
    assert "cannot read" in usage_error(hosts.read_hostfile, str(tmp_path / "missing.txt"))
    bad = tmp_path / "bad.txt"
    bad.write_text("node01\nnode[2-\n")
    assert usage_error(hosts.read_hostfile, str(bad)).startswith(f"--hostfile {bad}, line 2: ")


def test_the_flags_add_up_in_order_each_host_once(tmp_path: Path, slurm):
    hostfile = tmp_path / "hosts.txt"
    hostfile.write_text("a\nc\n")
    slurm({"731244": ["d,a"]})
    assert hosts.resolve("b,a", str(hostfile), "731244") == ["b", "a", "c", "d"]
    assert usage_error(hosts.resolve, "", None, None).startswith("no hosts")


def test_slurm_job_nodes_come_from_scontrol_every_task_of_an_array_job(slurm):
    slurm({"731244": ["node[001-002]", "(null)", "node[002-003]"]})
    assert hosts.slurm_job_hosts("731244") == ["node001", "node002", "node002", "node003"]


def test_slurm_job_that_is_pending_or_unknown_says_so(slurm):
    slurm({"5": ["(null)"]})
    assert "no nodes yet (it is pending)" in usage_error(hosts.slurm_job_hosts, "5")
    message = usage_error(hosts.slurm_job_hosts, "6")
    assert message == "scontrol show job --oneliner 6: slurm_load_jobs error: Invalid job id specified"


def test_slurm_job_without_slurm_says_what_to_do_instead(tmp_path: Path):
    result = dyno("--slurm-job", "731244", "status", env={"PATH": str(tmp_path)})  # no scontrol anywhere
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("dyno: --slurm-job needs Slurm's scontrol, and there is none on PATH")
    assert "--hosts or --hostfile" in result.stderr
