"""The sentences about a decision stay readable for a region of hundreds of tasks."""

from airflow_ft_provider.failover.decision import FailoverDecision, TryKey
from airflow_ft_provider.recovery.wording import decision_reason, task_names


def test_a_big_region_is_named_by_its_first_tasks_and_its_size():
    region = frozenset(f"s{i:03d}" for i in range(300))
    decision = FailoverDecision.restartable(
        TryKey("s299", 1),
        cause="RuntimeError: boom",
        decided_at=0.0,
        regions=(region,),
        delay=1.0,
        unavailable=(),
        new_attempt=True,
        strategy="FixedDelay",
        scope="run",
    )
    reason = decision_reason(decision)
    assert "[s000, s001," in reason and "s019, … (300 in all)]" in reason and "s020" not in reason
    assert len(reason) < 400
    assert task_names(["b", "a"]) == "a, b"  # small sets are named whole, sorted
