"""Chaos and scenario runs in a live Airflow: seeded random faults, shared scenario runs, and the
example pipeline's expected output to check them against."""
