"""Clears for the failover page, made in the API server itself as the user who pressed the button.

Region failover in a worker clears through the REST API with the ``airflow_api`` connection's service
account. The page must not: that account may clear DAGs its user may not, and Airflow's audit log would
name it instead of the user. So the page hands :class:`RegionFailover` this object instead of a REST
client. It runs the code of Airflow's own ``clearTaskInstances`` endpoint in the request's DB session,
for the one run of the URL that the route has authorised; the route's ``action_logging`` dependency
writes the audit log entry under the user's name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sqlalchemy import select

from airflow_ft_provider.hooks.task_instances import TaskInstanceRow

if TYPE_CHECKING:
    from airflow.api_fastapi.auth.managers.models.base_user import BaseUser
    from sqlalchemy.orm import Session


class CallerClears:
    """The ``TaskInstanceApi`` a manual restart clears through, bound to one run.

    :param session: the request's DB session.
    :param user: the authenticated caller (``GetUserDep``), already checked for clearing this DAG.
    """

    def __init__(self, *, session: Session, user: BaseUser, dag_id: str, run_id: str) -> None:
        self.session = session
        self.user = user
        self.dag_id = dag_id
        self.run_id = run_id

    def _check(self, dag_id: str, run_id: str) -> None:
        if (dag_id, run_id) != (self.dag_id, self.run_id):  # never reached: the description was checked
            raise PermissionError(
                f"refusing to act on {dag_id}/{run_id} in a request for {self.dag_id}/{self.run_id}"
            )

    def instances(self, dag_id: str, run_id: str) -> list[TaskInstanceRow]:
        from airflow.models.taskinstance import TaskInstance as TI

        self._check(dag_id, run_id)
        rows = self.session.execute(
            select(TI.task_id, TI.map_index, TI.state, TI.try_number, TI.id).where(
                TI.dag_id == dag_id, TI.run_id == run_id
            )
        ).all()
        return [TaskInstanceRow(r.task_id, r.map_index, r.try_number, r.state, str(r.id)) for r in rows]

    def clear_instances(
        self, dag_id: str, run_id: str, task_instances: Sequence[tuple[str, int]]
    ) -> list[TaskInstanceRow]:
        from airflow.api_fastapi.core_api.datamodels.task_instances import ClearTaskInstancesBody
        from airflow.api_fastapi.core_api.routes.public.task_instances import post_clear_task_instances
        from airflow.models.dagbag import DBDagBag

        self._check(dag_id, run_id)
        body = ClearTaskInstancesBody(
            dag_run_id=run_id,
            task_ids=[
                (task_id, map_index) if map_index >= 0 else task_id for task_id, map_index in task_instances
            ],
            dry_run=False,
            only_failed=False,
            include_upstream=False,
            include_downstream=False,
            reset_dag_runs=True,
        )
        response = post_clear_task_instances(
            dag_id=dag_id, dag_bag=DBDagBag(), body=body, session=self.session, user=self.user
        )
        self.session.commit()  # now, not when the request ends: the journal records it as done
        return [TaskInstanceRow(ti.task_id, ti.map_index, ti.try_number) for ti in response.task_instances]

    def try_state(
        self, dag_id: str, run_id: str, task_id: str, map_index: int, try_number: int
    ) -> str | None:
        raise NotImplementedError("the failover page restarts regions; it does not reconcile killed tries")
