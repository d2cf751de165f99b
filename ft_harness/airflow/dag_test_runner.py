"""Runs one DAG with ``dag.test()`` and prints its outcome as JSON.

ft_harness/airflow/dag_test.py calls :func:`main` in a fork of its fork server (dag_test_forkserver.py); by
hand, with the Airflow home's environment::

    python -m ft_harness.airflow.dag_test_runner DAG_FILE DAG_ID [CONF_JSON]
"""

from __future__ import annotations

import json
import sys


def main(dag_file: str, dag_id: str, conf: str = "{}") -> None:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=dag_file)
    if bag.import_errors or dag_id not in bag.dags:
        raise SystemExit(f"cannot load {dag_id} from {dag_file}: {bag.import_errors or sorted(bag.dags)}")
    dag = bag.dags[dag_id]
    run = dag.test(run_conf=json.loads(conf))
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        tis = (
            session.query(TaskInstance)
            .filter(TaskInstance.dag_id == dag_id, TaskInstance.run_id == run.run_id)
            .all()
        )
        tasks = [
            {
                "task_id": ti.task_id,
                "map_index": ti.map_index,
                "state": str(ti.state),
                "try_number": ti.try_number,
            }
            for ti in tis
        ]
    print("DAG_TEST_RESULT " + json.dumps({"run_id": run.run_id, "state": str(run.state), "tasks": tasks}))


if __name__ == "__main__":
    main(*sys.argv[1:])
