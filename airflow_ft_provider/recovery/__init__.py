"""The path from a failure to the next try, in a running Airflow.

1. A stage try fails. ``retry_policy.FailoverRetryPolicy`` (Airflow's RetryPolicy of every stage) asks
   ``coordinator.RegionFailover.handle_failure``: the core decides (restart strategy + failover
   strategy, with the partitions ``check_graph`` finds lost), the decision goes to the run's
   ``journal.RecoveryJournal`` in S3 (compare-and-swap), the other started tasks of the restart set are
   cleared through the REST API, and the policy returns retry-after-delay or fail.
2. A try starts. ``RegionFailover.before_work`` reconciles a previous try that ended without a
   recorded decision (a killed process) and returns a ``try_start.TryStart``: proceed, wait until the
   region's restart time (the operator defers), or superseded (do nothing; producers restart first).
3. By hand: ``RegionFailover.restart_regions`` (the UI page, ``airflow-ft restart-region``).

``locator`` finds a run's pipeline and store: the parsed one in a worker, the stored one elsewhere.
"""
