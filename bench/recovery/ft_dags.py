"""This provider's variants of the recovery benchmark's pipeline, as Airflow DAGs (bench_recovery_work
drives them; the shape is shape.py's, the pipeline ft_pipeline.py's, the comparisons are dags.py's):

* bench_recovery_ft: each stage a spark-submit;
* bench_recovery_ft_connect: each stage a session on the Spark Connect server;
* bench_recovery_ft_connect_4: the same, four stages at a time, one per branch (the server's two cores
  shared by Spark's scheduler, as within the single application).
"""

from ft_pipeline import ft_pipeline
from shape import BRANCHES

ft_pipeline("bench_recovery_ft", "spark_submit", 2)
ft_pipeline("bench_recovery_ft_connect", "spark_default", 2)
ft_pipeline("bench_recovery_ft_connect_4", "spark_default", BRANCHES)
