"""Authorization as a pure decision, and the output-path allow-list (`--trace-root`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import grpc
import pytest

from dynolog.core.paths import check_output_path
from dynolog.edge.auth import Access, AccessPolicy, Peer, Refusal, authorize

STATUS = "/dynolog.v1.Dynolog/GetStatus"
TRACE = "/dynolog.v1.Dynolog/NpuTrace"
ALICE = Peer("alice", 0xA1)


def never_revoked(serial: int) -> Optional[str]:
    return None


def test_default_every_valid_client_is_an_operator() -> None:
    assert AccessPolicy().access("anyone") is Access.OPERATOR
    assert authorize(ALICE, TRACE, AccessPolicy(), never_revoked) is None


def test_explicit_operator_wins_over_read_only() -> None:
    policy = AccessPolicy(operators=("alice",), read_only=("*",))
    assert [policy.access(cn) for cn in ("alice", "bob")] == [Access.OPERATOR, Access.READ_ONLY]


def test_read_only_patterns_leave_others_operators_by_default() -> None:
    policy = AccessPolicy(read_only=("viewer-*",))
    assert [policy.access(cn) for cn in ("viewer-1", "alice")] == [Access.READ_ONLY, Access.OPERATOR]


def test_operator_list_refuses_the_unlisted() -> None:
    refusal = authorize(Peer("mallory", 1), STATUS, AccessPolicy(operators=("ops-*",)), never_revoked)
    assert refusal is not None
    assert refusal.code is grpc.StatusCode.PERMISSION_DENIED
    assert refusal.message == (
        "client 'mallory' matches neither --operator-clients nor --read-only-clients of this daemon: "
        "/dynolog.v1.Dynolog/GetStatus refused"
    )


@pytest.mark.parametrize(
    "method",
    [
        STATUS,
        "/dynolog.v1.Dynolog/GetVersion",
        "/dynolog.v1.Dynolog/ListProcesses",
        "/dynolog.v1.Dynolog/GetTrace",
        "/dynolog.v1.Dynolog/WatchTrace",
        "/dynolog.v1.Dynolog/WatchMetrics",
        "/grpc.health.v1.Health/Check",
        "/grpc.health.v1.Health/Watch",
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
    ],
)
def test_read_only_may_read(method: str) -> None:
    assert authorize(ALICE, method, AccessPolicy(read_only=("alice",)), never_revoked) is None


@pytest.mark.parametrize(
    "method",
    [
        TRACE,
        "/dynolog.v1.Dynolog/GpuTrace",
        "/dynolog.v1.Dynolog/NpuMonitor",
        "/dynolog.v1.Dynolog/Dynamic",
        "/dynolog.v1.Dynolog/CancelTrace",
    ],
)
def test_read_only_may_not_act(method: str) -> None:
    refusal = authorize(ALICE, method, AccessPolicy(read_only=("alice",)), never_revoked)
    assert refusal == Refusal(
        grpc.StatusCode.PERMISSION_DENIED,
        f"client 'alice' is read-only on this daemon (--read-only-clients): {method} needs an operator "
        "(--operator-clients)",
    )


def test_revocation_comes_before_roles() -> None:
    refusal = authorize(ALICE, STATUS, AccessPolicy(), lambda serial: "revoked on X")
    assert refusal is not None
    assert (refusal.code, refusal.message) == (
        grpc.StatusCode.UNAUTHENTICATED,
        "client certificate 'alice' (serial A1): revoked on X",
    )


def test_no_certificate_is_unauthenticated() -> None:
    refusal = authorize(None, STATUS, AccessPolicy(), never_revoked)
    assert refusal is not None and refusal.code is grpc.StatusCode.UNAUTHENTICATED


def test_output_paths_without_roots_are_free() -> None:
    assert check_output_path("/anywhere/trace", []) is None


def test_output_paths_inside_and_outside_roots(tmp_path: Path) -> None:
    root = tmp_path / "traces"
    (root / "job1").mkdir(parents=True)
    roots = [str(root)]
    assert check_output_path(str(root / "job1" / "out"), roots) is None
    assert check_output_path(str(root), roots) is None
    assert check_output_path(str(root / ".." / "etc"), roots) == (
        f"log_file '{root}/../etc': outside the --trace-root directories of this daemon ({root})"
    )
    assert check_output_path(f"{root}-evil/x", roots) is not None  # a prefix is not a parent
    assert check_output_path("relative/out", roots, field="log_file") == (
        f"log_file 'relative/out': must be an absolute path under a --trace-root of this daemon ({root})"
    )


def test_output_path_through_a_symlink_is_resolved(tmp_path: Path) -> None:
    root = tmp_path / "traces"
    root.mkdir()
    os.symlink("/etc", root / "escape")
    assert check_output_path(str(root / "escape" / "x"), [str(root)]) is not None
