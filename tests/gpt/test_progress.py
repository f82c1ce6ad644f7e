"""Progress: a bar on a terminal, plain lines every few seconds elsewhere."""

from __future__ import annotations

import io

import pytest

from gpt.progress import INTERVAL_VARIABLE, Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _shown(total: int, updates: int, **options) -> list[str]:
    stream = io.StringIO()  # not a terminal, as a log or a pipe
    with Progress("training", total, unit="step", stream=stream, **options) as progress:
        for n in range(updates):
            progress.update(note=f"loss {5 - n:.3f}")
    return stream.getvalue().splitlines()


def test_every_update_is_a_line_at_interval_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(INTERVAL_VARIABLE, "0")
    lines = _shown(3, 3)
    assert [line.rsplit(", ", 1)[0] for line in lines] == [
        "training: step 1/3, loss 5.000",
        "training: step 2/3, loss 4.000",
        "training: step 3/3, loss 3.000",
    ]
    assert all(line.endswith(" elapsed") for line in lines)


def test_a_long_interval_shows_the_first_update_and_the_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(INTERVAL_VARIABLE, "1e9")
    lines = _shown(10, 4, completed=2)  # a resumed run starts at its step
    assert [line.split(",")[0] for line in lines] == ["training: step 3/10", "training: step 6/10"]


def test_a_bad_interval_is_one_line_and_the_default(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(INTERVAL_VARIABLE, "soon")
    assert len(_shown(3, 3)) == 2  # the first update and the end, 5 s apart at most
    (warning,) = capsys.readouterr().err.splitlines()
    assert warning.startswith(f"warning: {INTERVAL_VARIABLE}='soon' is not a number of seconds")


def test_disabled_shows_nothing_and_a_terminal_gets_the_bar(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(INTERVAL_VARIABLE, "0")
    monkeypatch.setenv("FORCE_COLOR", "1")  # colours asked for: a log is still not a terminal
    assert len(_shown(3, 3)) == 3
    assert _shown(3, 3, enabled=False) == []
    terminal = Terminal()
    with Progress("training", 3, unit="step", stream=terminal) as progress:
        for n in range(3):
            progress.update(note=f"loss {5 - n:.3f}")
    text = terminal.getvalue()
    assert "3/3" in text and "loss 3.000" in text and "\x1b[" in text  # drawn in place
    assert "training: step" not in text
