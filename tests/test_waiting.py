"""dyno's waits for a starting daemon (dyno.waiting): bounded, and only an unreachable daemon is retried."""

from __future__ import annotations

from typing import List, Optional

import pytest

from dyno import waiting
from dyno.exits import EXIT_FAILED, EXIT_UNREACHABLE, EXIT_USAGE, CliError


@pytest.fixture(autouse=True)
def short_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(waiting, "BOUND_S", 0.3)
    monkeypatch.setattr(waiting, "POLL_S", 0.01)


def test_an_unreachable_daemon_is_asked_again_until_it_answers() -> None:
    answers: List[object] = [CliError("refused", EXIT_UNREACHABLE), CliError("refused", EXIT_UNREACHABLE), 2]

    def ask() -> int:
        answer = answers.pop(0)
        if isinstance(answer, CliError):
            raise answer
        return int(answer)  # type: ignore[call-overload]

    assert waiting.until(ask, lambda n: None) == 2


def test_an_answer_that_is_not_enough_yet_ends_in_what_is_missing() -> None:
    def not_yet(n: int) -> Optional[str]:
        return f"{n} of 3 registered"

    with pytest.raises(CliError) as failed:
        waiting.until(lambda: 1, not_yet)
    assert failed.value.exit_code == EXIT_FAILED
    assert str(failed.value) == "1 of 3 registered (waited 0 s)"


def test_a_daemon_that_never_answers_is_unreachable_after_the_bound() -> None:
    def ask() -> int:
        raise CliError("cannot reach dynolog at localhost:1", EXIT_UNREACHABLE)

    with pytest.raises(CliError) as failed:
        waiting.until(ask, lambda n: None)
    assert failed.value.exit_code == EXIT_UNREACHABLE
    assert "cannot reach dynolog" in str(failed.value)


def test_any_other_failure_ends_the_wait_at_once() -> None:
    calls = []

    def ask() -> int:
        calls.append(1)
        raise CliError("--certs-dir: no ca.crt", EXIT_USAGE)

    with pytest.raises(CliError):
        waiting.until(ask, lambda n: None)
    assert len(calls) == 1
