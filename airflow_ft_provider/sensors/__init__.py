"""Airflow sensors: waits on the partition store."""
