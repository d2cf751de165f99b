"""Region failover in a running Airflow: the retry policy, the run's recovery journal, the coordinator."""
