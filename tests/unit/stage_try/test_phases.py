"""A try's phases: each one's wall time, said in one log line that the benchmark reads back."""

import time

import pytest

from airflow_ft_provider.stage_try.phases import PHASES, TryPhases, parse_summary


def test_each_phase_counts_its_own_time_and_the_line_reads_back():
    phases = TryPhases()
    with phases.phase("inputs"):
        time.sleep(0.05)
    with phases.phase("spark"):
        time.sleep(0.1)
    with phases.phase("spark"):  # a phase entered twice adds up
        time.sleep(0.05)
    line = phases.summary()
    assert line.startswith("stage try phases (s): inputs 0.0") and "spark 0.1" in line, line
    log = f"[info] something else\n[info] {line}\n[info] done"
    read = parse_summary(log)
    assert set(read) == {"inputs", "spark", "total"}
    assert 0.05 <= read["inputs"] < 0.1 and 0.15 <= read["spark"] < 0.25
    assert read["total"] >= read["inputs"] + read["spark"] - 0.01  # each figure rounded to 0.01 s


def test_a_failing_phase_still_counts_and_the_last_line_wins():
    phases = TryPhases()
    with pytest.raises(RuntimeError), phases.phase("commit"):
        raise RuntimeError("S3 refused")
    assert "commit" in phases.seconds
    first = "stage try phases (s): gate 9.00; total 9.00"
    assert parse_summary(f"{first}\n{phases.summary()}")["total"] < 9


def test_unknown_phases_are_refused_and_a_log_without_the_line_says_so():
    with pytest.raises(ValueError, match="unknown try phase 'upload'"), TryPhases().phase("upload"):
        pass
    assert parse_summary("no summary here") is None
    assert PHASES[0] == "gate" and PHASES[-1] == "release"  # the order the line lists them in
