"""The retry policy when the recovery journal (S3) cannot be reached."""

from airflow_ft_provider.recovery.layered_restarts import UNRECORDED_GIVE_UP_TRY, unrecorded_retry


def test_an_unreachable_journal_backs_off_and_gives_up():
    err = ConnectionError("S3 down")
    delays = [unrecorded_retry(n, err).retry_delay.total_seconds() for n in range(1, UNRECORDED_GIVE_UP_TRY)]
    assert delays[:4] == [5, 10, 20, 40] and max(delays) == 300
    assert sum(delays) >= 20 * 60  # about half an hour of outage is ridden out
    final = unrecorded_retry(UNRECORDED_GIVE_UP_TRY, err)
    assert final.action.value == "fail" and "could not reach its recovery journal" in final.reason
