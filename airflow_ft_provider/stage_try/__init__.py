"""One try of a pipeline stage, between the run's recovery (``recovery/``) and the Airflow operator
(``operators/spark_stage.py``, a thin adapter), in phases that each return a typed value::

    TryScope.of(...)             scope.py        what every phase reads, built once (frozen)
    reuse or adopt               reuse.py        an earlier try's output, committed and unchanged
                                 adoption.py     or one a killed try finished: no Spark at all
    plan                         plan.py         TryPlan: inputs resolved and verified, outputs placed
    run (plain or checkpointed)  attempt.py      the application; checkpointed.py: resume, checkpoints
    commit                       commit.py       Committed: manifests fenced by the try's number
    release                      commit.py       engine-held inputs, by their last consumer

``StageTry`` (``attempt.py``) runs them top to bottom. Every journal read and write goes through the
recovery door (``RunRecovery``, in the scope); the try's own events are typed
(``recovery/journal_events.py``).
Kept apart from the operator's declaration: parsing a DAG file imports none of it.
"""
