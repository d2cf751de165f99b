"""The path from a failure to the next try, in a running Airflow: one door, ``run_recovery.RunRecovery``.

1. A stage try fails. ``retry_policy.FailoverRetryPolicy`` calls ``RunRecovery.for_worker(context)
   .handle_failure``: ``decide`` records the failure and decides with the core's handler (restart strategy +
   failover strategy, with the partitions ``check_graph`` finds lost) in the run's ``journal`` in S3
   (compare-and-swap), saves the restart as pending, and ``reconcile`` has ``clearing`` clear the other
   started tasks of the restart set through the REST API; the policy retries after the delay, or fails.
2. A try starts. ``RunRecovery.for_worker(context).before_try`` (``gate``) finishes pending restarts,
   handles a previous try that ended without a recorded decision (a killed process), and returns a
   ``try_start.TryStart``: proceed, wait until the region's restart time (the operator defers), or
   superseded (do nothing; producers restart first).
3. By hand: ``RunRecovery.for_reader(store, dag_id, run_id).restart_regions`` (the UI page,
   ``airflow-ft restart-region``).

``journal_schema`` is the stored state's versioned JSON; ``pending`` the REST API's half of it;
``wording`` the sentences people read.
"""
