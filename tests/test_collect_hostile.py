"""``--collect`` against a daemon that lies: a real ``dyno`` fetching from a gRPC server (on a port the OS
chose) that serves whatever chunks the test scripts, and a DIR another user may have written into
first. dyno must neither write outside DIR nor without bound, nor crash, nor leave a hidden ``.part``.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Iterator, List, Union

import grpc
import pytest

from dynoproto import dynolog_pb2 as pb
from dynoproto import dynolog_pb2_grpc as pb_grpc
from harness import Completed, Dyno, wait_until

TRACE_ID = "123456789012345678"
PID = 7
PREFIX = f"127.0.0.1_rank0_pid{PID}"  # the process's folder in DIR, as dyno names it
MIB = 1 << 20


Script = List[Union[pb.FileChunk, Callable[[], None]]]  # chunks to send, and what to do between them


class Liar(pb_grpc.DynologServicer):
    """A daemon with one finished trace whose files are the chunks of its *script*; a callable in it is
    called when the stream reaches it (to change DIR while dyno fetches)."""

    def __init__(self, script: Script) -> None:
        self.script = script

    def GetTrace(self, request: pb.GetTraceRequest, context: grpc.ServicerContext) -> pb.TraceInfo:
        process = pb.TraceProcess(pid=PID, host_pid=PID, rank=0, phase=pb.TRACE_PHASE_FINISHED)
        return pb.TraceInfo(trace_id=TRACE_ID, kind="nputrace", done=True, processes=[process])

    def FetchTraceFiles(
        self, request: pb.GetTraceRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.FileChunk]:
        for step in self.script:
            if isinstance(step, pb.FileChunk):
                yield step
            else:
                step()


def chunk(name: str, size: int, offset: int, data: bytes) -> pb.FileChunk:
    return pb.FileChunk(
        host_pid=PID, pid=PID, rank=0, name=name, path=f"/t/{name}", size=size, offset=offset, data=data
    )


def collect(script: Script, folder: Path) -> Completed:
    """``dyno trace ID --collect folder`` against a :class:`Liar` serving *script*."""
    server = grpc.server(ThreadPoolExecutor(2))
    pb_grpc.add_DynologServicer_to_server(Liar(script), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        return Dyno(("--hostname", "127.0.0.1", "--port", str(port)))(
            "trace", TRACE_ID, "--collect", str(folder)
        )
    finally:
        server.stop(None)


def no_part_left(folder: Path) -> bool:
    return not [p for p in folder.rglob("*") if p.name.endswith(".part")]


def test_a_link_planted_where_a_process_folder_goes_is_not_followed(tmp_path: Path):
    """Another user made DIR/<host>_rank0_pid7 a link to a folder of the victim's: nothing lands there."""
    victim, folder = tmp_path / "victim-ssh", tmp_path / "shared"
    victim.mkdir()
    folder.mkdir()
    (folder / PREFIX).symlink_to(victim)
    result = collect([chunk("authorized_keys", 4, 0, b"evil")], folder)
    assert result.returncode == 1 and "this fetch did not make it" in result.stderr, result.stderr
    assert list(victim.iterdir()) == []
    assert no_part_left(folder)


def test_a_folder_swapped_for_a_link_after_dyno_made_it_is_not_followed(tmp_path: Path):
    """In a DIR another user can write, the process's folder is moved away once dyno made it and a link
    to the victim's folder put in its place, before the next file: that file is refused, not written
    through the link."""
    victim, folder = tmp_path / "victim-ssh", tmp_path / "shared"
    victim.mkdir()
    made = folder / PREFIX

    def swap() -> None:
        wait_until(made.is_dir, what="dyno to make the process's folder")
        made.rename(folder / "moved")
        made.symlink_to(victim)

    result = collect([chunk("a.json", 2, 0, b"{}"), swap, chunk("authorized_keys", 4, 0, b"evil")], folder)
    assert result.returncode == 1, result.stderr
    assert list(victim.iterdir()) == []
    assert (folder / "moved" / "a.json").read_bytes() == b"{}", "the file begun before the swap still lands"
    assert no_part_left(folder)


def test_a_thousand_level_name_is_refused_not_a_crash(tmp_path: Path):
    deep = "a/" * 1500 + "x.json"
    result = collect([chunk(deep, 4, 0, b"deep"), chunk("ok.json", 2, 0, b"{}")], tmp_path / "out")
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert "nested deeper than" in result.stderr
    assert (tmp_path / "out" / PREFIX / "ok.json").read_bytes() == b"{}", "the next file still comes"
    assert not (tmp_path / "out" / PREFIX / "a").exists()


def test_chunks_beyond_the_announced_size_are_not_written(tmp_path: Path):
    flood = [chunk("small.json", 10, n * MIB, b"x" * MIB) for n in range(8)]
    result = collect(flood, tmp_path / "out")
    assert result.returncode == 1 and "more than the 10 bytes announced" in result.stderr, result.stderr
    assert not (tmp_path / "out" / PREFIX / "small.json").exists()
    assert no_part_left(tmp_path / "out")


@pytest.mark.parametrize("size", [100, 0], ids=["shrank", "grew"])
def test_a_file_that_changed_size_during_the_fetch_leaves_no_part(tmp_path: Path, size: int):
    """The daemon announced *size* from stat, then read 50 bytes: an honest daemon can do that."""
    result = collect([chunk("changing.json", size, 0, b"y" * 50)], tmp_path / "out")
    assert result.returncode == 1, result.stderr
    assert not (tmp_path / "out" / PREFIX / "changing.json").exists()
    assert no_part_left(tmp_path / "out")
