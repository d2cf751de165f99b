"""The UI plugin, registered through the ``airflow.plugins`` entry point (pyproject.toml).

It mounts the failover page's FastAPI app at ``/ft-failover`` and adds it to the UI three times: in the
navigation (runs with a recovery journal), as a tab of every DAG run, and as a tab of every task
instance (opening the page at that task's region).
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from airflow_ft_provider.operators.spark_stage import FAILOVER_UI_PREFIX

ICON = "data:image/svg+xml;utf8," + (
    "<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 24 24' fill='none' "
    "stroke='%23e58a00' stroke-width='2'>"
    "<path d='M3 12a9 9 0 0 1 15.5-6.3L21 8'/><path d='M21 3v5h-5'/>"
    "<path d='M21 12a9 9 0 0 1-15.5 6.3L3 16'/>"
    "<path d='M3 21v-5h5'/></svg>"
)


class FailoverUiPlugin(AirflowPlugin):
    name = "ft_failover"
    external_views = [
        {
            "name": "Failover",
            "href": f"{FAILOVER_UI_PREFIX}/",
            "destination": "nav",
            "icon": ICON,
            "url_route": "ft-failover",
        },
        {
            "name": "Failover",
            "href": f"{FAILOVER_UI_PREFIX}/runs/{{DAG_ID}}/{{RUN_ID}}",
            "destination": "dag_run",
            "icon": ICON,
            "url_route": "ft-failover-run",
        },
        {
            "name": "Failover region",
            "href": (
                f"{FAILOVER_UI_PREFIX}/runs/{{DAG_ID}}/{{RUN_ID}}?task={{TASK_ID}}&map_index={{MAP_INDEX}}"
            ),
            "destination": "task_instance",
            "icon": ICON,
            "url_route": "ft-failover-task",
        },
    ]

    @property
    def fastapi_apps(self) -> list[dict[str, object]]:  # type: ignore[override]
        # Built on first use, in the API server only: other components never import FastAPI routes.
        from airflow_ft_provider.plugins.app import app

        return [{"app": app, "url_prefix": FAILOVER_UI_PREFIX, "name": "Failover (airflow-ft-provider)"}]
