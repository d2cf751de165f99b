"""airflow-ft-provider: Apache Flink's batch failure recovery for Spark pipelines run by Airflow 3.

The failover core is importable without Airflow: ``from airflow_ft_provider.failover import ...``.
Airflow adapters (operators, sensors, triggers, hooks) live in their own subpackages, as in other
providers, so importing this package stays cheap.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
