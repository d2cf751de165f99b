"""What runs inside the PySpark application: the stage spec and partition I/O (no Airflow, no boto3)."""
