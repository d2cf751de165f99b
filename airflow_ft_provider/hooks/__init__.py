"""Airflow hooks: thin adapters that build clients from Airflow connections."""
