"""write_stream's output modes: the one whose micro-batches do not add up to the result is refused."""

import pytest

from airflow_ft_provider.spark.spec import CheckpointSpec, StageSpec
from airflow_ft_provider.spark.stage_io import StageIO, StageIOError


def test_write_stream_refuses_update_mode_naming_the_modes_to_use():
    spec = StageSpec("etl", "r", "totals", None, 1, checkpoint=CheckpointSpec("file:///tmp/x/spark", 1024))
    with pytest.raises(StageIOError, match="use 'append' .* or 'complete' .*'update' writes only the rows"):
        StageIO(None, spec).write_stream("totals", None, output_mode="update")
