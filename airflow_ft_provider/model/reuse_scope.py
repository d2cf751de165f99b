"""How far a stage looks for an output it computed already from the same inputs and code (``reuse=``).

* ``"within-run"`` (the default): a later try of the task in the same run publishes its own earlier
  output again (``stage_try/reuse.py``). That output is a valid result of this run for identical
  inputs, so the run's output stays exactly once.
* ``"across-runs"``: also an output an earlier run of the pipeline committed, while the store keeps that
  run (its retention): the files are copied inside S3 into this run. Opt-in, because it takes the code
  identity (file bytes or callable source, arguments, conf) as proof that the stage would compute the
  same rows: a stage that reads the clock or an outside table must not use it.
* ``"off"``: Spark runs on every try (a stage with effects beyond its outputs: writes elsewhere, sends
  messages).
"""

from __future__ import annotations

import enum

from airflow_ft_provider.model.choice import parse_choice


class ReuseScope(enum.Enum):
    OFF = "off"
    WITHIN_RUN = "within-run"
    ACROSS_RUNS = "across-runs"

    @classmethod
    def parse(cls, value: object, *, where: str) -> ReuseScope:
        """``value`` as declared (a ReuseScope or its name); ValueError naming ``where`` otherwise."""
        return parse_choice(cls, value, where=where, key="reuse", see="Reusing unchanged outputs")

    @staticmethod
    def of_stage(declared: ReuseScope | None, pipeline: ReuseScope, *, checkpointed: bool) -> ReuseScope:
        """A stage's scope: its own, else its pipeline's; off for a checkpointed stage (it resumes)."""
        if checkpointed:
            return ReuseScope.OFF
        return pipeline if declared is None else declared
