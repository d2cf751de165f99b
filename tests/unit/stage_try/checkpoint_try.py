"""One try of ``squares`` of tests/unit/stage_try/test_checkpointed.py in a process of its own, which a
fault (mode ``kill``) may SIGKILL as a lost worker dies.

``python -m tests.unit.stage_try.checkpoint_try STORE_URL TASK TRY FAULTS_JSON``; connections, the checkpoint
directory and fault injection come from the environment the test set.
"""

from __future__ import annotations

import json
import sys

from tests.apps import checkpointed as apps
from tests.unit.stage_try.test_checkpointed import checkpointed_dag, run


def main(argv: list[str]) -> None:
    store_url, task, try_number, faults = argv
    dag = checkpointed_dag(store_url, {"python_callable": apps.squares}, {})
    run(dag, task, int(try_number), json.loads(faults))
    print("DONE", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
