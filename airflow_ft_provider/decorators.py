"""``@ft_stage``: a pipeline stage written as a Python function of the Spark session and the stage's I/O.

    @ft_stage(inputs=["raw"], outputs={"cleaned": "pipelined"})
    def clean(spark, io, shard, shards):
        io.write("cleaned", io.read("raw").where(...))

    clean(0, 1)                                             # one task, clean(spark, io, 0, 1)
    clean.partial(shards=3).expand(shard=[0, 1, 2])         # three map indexes, like @task
    clean.partial(shards=3).expand(shard=list_shards.output) # as many as the task returned
    clean.expand_kwargs(list_jobs.output)                   # one per dict of arguments returned
    clean.override(task_id="clean_eu", spark_conn_id="eu")  # operator arguments

Each call builds the same ``SparkStageOperator(python_callable=...)`` a DAG author would write by hand,
so the pipeline, its regions and its recovery do not know the difference. The function runs in the
worker against a Spark Connect session (``python_callable`` stages need a ``spark_connect``
connection). Its arguments after ``spark`` and ``io`` are passed as given (not as strings). ``expand``
takes literal lists (their product, as Airflow's), or one other task's output: then the stage has as
many map indexes as that output has items, counted when the run gets there (``model/map_counts.py``).
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import overload

from airflow.sdk import XComArg

from airflow_ft_provider._compat import MappedOperator
from airflow_ft_provider.operators.spark_stage import SparkStageOperator

StageCallable = Callable[..., object]
# The operator with its arguments unchecked by mypy: they are the DAG author's, passed through as given
# and checked by SparkStageOperator itself when the DAG is parsed.
_new_stage: Callable[..., SparkStageOperator] = SparkStageOperator


class StageFunction:
    """A decorated stage function: calling it (or ``partial(...).expand(...)``) adds a stage task."""

    def __init__(self, function: StageCallable, operator_kwargs: Mapping[str, object]) -> None:
        if not callable(function):
            raise TypeError(f"@ft_stage decorates a function of (spark, io, ...), got {function!r}")
        self.function = function
        self.operator_kwargs = dict(operator_kwargs)
        parameters = list(inspect.signature(function).parameters.values())
        positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        if len(parameters) < 2 or any(p.kind not in positional for p in parameters[:2]):
            raise TypeError(
                f"@ft_stage function {self.task_id!r} must take the Spark session and the stage's I/O "
                f"first: def {function.__name__}(spark, io, ...)"
            )
        self.arguments = [p for p in parameters[2:] if p.kind in positional]
        if len(self.arguments) != len(parameters) - 2:
            raise TypeError(
                f"@ft_stage function {self.task_id!r}: its arguments after (spark, io) must be plain "
                "positional-or-keyword ones (no *args, **kwargs or keyword-only): they are passed in order"
            )

    @property
    def task_id(self) -> str:
        return str(self.operator_kwargs.get("task_id") or self.function.__name__)

    def _ordered(self, given: Mapping[str, object]) -> list[object]:
        """The function's arguments after (spark, io), in its own order, from names given by the caller."""
        names = [p.name for p in self.arguments]
        if unknown := sorted(set(given) - set(names)):
            raise TypeError(
                f"@ft_stage {self.task_id!r} takes no argument {unknown[0]!r}; it takes {names or 'none'}"
            )
        values = []
        for parameter in self.arguments:
            if parameter.name in given:
                values.append(given[parameter.name])
            elif parameter.default is not inspect.Parameter.empty:
                values.append(parameter.default)
            else:
                raise TypeError(f"@ft_stage {self.task_id!r} needs its argument {parameter.name!r}")
        return values

    def _operator_kwargs(self) -> dict[str, object]:
        return {"task_id": self.task_id, "python_callable": self.function, **self.operator_kwargs}

    def __call__(self, *args: object, **kwargs: object) -> SparkStageOperator:
        """One stage task, the function called with these arguments after (spark, io)."""
        names = [p.name for p in self.arguments]
        if len(args) > len(names):
            raise TypeError(f"@ft_stage {self.task_id!r} takes {len(names)} arguments after (spark, io)")
        given = dict(zip(names, args, strict=False))
        if twice := sorted(set(given) & set(kwargs)):
            raise TypeError(f"@ft_stage {self.task_id!r} got argument {twice[0]!r} twice")
        return _new_stage(application_args=self._ordered({**given, **kwargs}), **self._operator_kwargs())

    def override(self, **operator_kwargs: object) -> StageFunction:
        """The same function with other operator arguments (task_id, spark_conn_id, conf, ...)."""
        return StageFunction(self.function, {**self.operator_kwargs, **operator_kwargs})

    def partial(self, **fixed: object) -> PartialStage:
        """Arguments every map index gets; ``expand`` names the ones that vary."""
        return PartialStage(self, fixed)

    def expand(self, **varying: Sequence[object] | XComArg) -> MappedOperator:
        return self.partial().expand(**varying)

    def expand_kwargs(self, kwargs: XComArg) -> MappedOperator:
        return self.partial().expand_kwargs(kwargs)


class PartialStage:
    def __init__(self, stage: StageFunction, fixed: Mapping[str, object]) -> None:
        self.stage = stage
        self.fixed = dict(fixed)

    def expand(self, **varying: Sequence[object] | XComArg) -> MappedOperator:
        """A mapped stage: one map index per combination of the lists (their product, in order, as
        Airflow's ``expand`` over several arguments), or per item of one other task's output."""
        if not varying:
            raise TypeError(f"@ft_stage {self.stage.task_id!r}: expand needs at least one list of values")
        if overlap := sorted(set(self.fixed) & set(varying)):
            raise TypeError(
                f"@ft_stage {self.stage.task_id!r}: {overlap[0]!r} is given to partial and expand"
            )
        outputs = [name for name, values in varying.items() if isinstance(values, XComArg)]
        if outputs:
            if len(varying) > 1:
                raise TypeError(
                    f"@ft_stage {self.stage.task_id!r}: expand({outputs[0]}=<a task's output>) must be the "
                    "only argument that varies; give the others to partial(), or expand_kwargs over a "
                    "task that returns a dict of arguments per map index"
                )
            name, output = outputs[0], varying[outputs[0]]
            assert isinstance(output, XComArg)
            return self._mapped(output.map(_Arguments(self.stage, self.fixed, name).of_value))
        lists: dict[str, Sequence[object]] = {}
        for name, values in varying.items():
            if not isinstance(values, (list, tuple)):
                raise TypeError(
                    f"@ft_stage {self.stage.task_id!r}: expand({name}=...) must be a list or another "
                    f"task's output (an XComArg such as list_files.output), got {type(values).__name__}"
                )
            lists[name] = values
        combinations = itertools.product(*lists.values())
        arguments = [
            self.stage._ordered({**self.fixed, **dict(zip(varying, c, strict=True))}) for c in combinations
        ]
        return self._mapped(arguments)

    def expand_kwargs(self, kwargs: XComArg) -> MappedOperator:
        """A mapped stage with one map index per dict of arguments another task returned."""
        if not isinstance(kwargs, XComArg):
            raise TypeError(
                f"@ft_stage {self.stage.task_id!r}: expand_kwargs takes another task's output (an XComArg "
                f"returning a list of dicts), got {type(kwargs).__name__}; for literal values use expand"
            )
        return self._mapped(kwargs.map(_Arguments(self.stage, self.fixed, None).of_kwargs))

    def _mapped(self, arguments: list[list[object]] | XComArg) -> MappedOperator:
        return SparkStageOperator.partial(**self.stage._operator_kwargs()).expand(application_args=arguments)


class _Arguments:
    """The function's arguments of one map index, from an item of another task's output (applied by
    Airflow in the worker, ``XComArg.map``): a bound method of this is what Airflow maps with."""

    def __init__(self, stage: StageFunction, fixed: Mapping[str, object], name: str | None) -> None:
        self.stage, self.fixed, self.name = stage, dict(fixed), name

    def of_value(self, value: object) -> list[object]:
        assert self.name is not None
        return self.stage._ordered({**self.fixed, self.name: value})

    def of_kwargs(self, kwargs: object) -> list[object]:
        if not isinstance(kwargs, Mapping):
            raise TypeError(
                f"@ft_stage {self.stage.task_id!r}: expand_kwargs needs a dict of arguments per map "
                f"index, got {type(kwargs).__name__}"
            )
        return self.stage._ordered({**self.fixed, **kwargs})


@overload
def ft_stage(function: StageCallable, /, **operator_kwargs: object) -> StageFunction: ...


@overload
def ft_stage(
    function: None = None, /, **operator_kwargs: object
) -> Callable[[StageCallable], StageFunction]: ...


def ft_stage(
    function: StageCallable | None = None,
    /,
    *,
    inputs: object = None,
    outputs: object = None,
    **operator_kwargs: object,
) -> StageFunction | Callable[[StageCallable], StageFunction]:
    """Declare a pipeline stage as a function ``fn(spark, io, ...)``: ``@ft_stage`` or
    ``@ft_stage(inputs=[...], outputs={...}, spark_conn_id=..., ...)`` (any SparkStageOperator argument
    but ``application`` and ``python_callable``)."""
    for taken in ("application", "python_callable", "application_args"):
        if taken in operator_kwargs:
            raise TypeError(f"@ft_stage sets {taken} itself; the decorated function is the stage's code")
    kwargs = {**operator_kwargs, "inputs": inputs, "outputs": outputs}
    if function is not None:
        return StageFunction(function, kwargs)
    return lambda decorated: StageFunction(decorated, kwargs)
