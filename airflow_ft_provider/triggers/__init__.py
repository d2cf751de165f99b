"""Airflow triggers: asynchronous waits that run in the triggerer."""
