"""Stage callables of the checkpointed-stage tests (Spark Connect: ``fn(spark, io)``)."""

ROWS = 12_000
FILES = 8


def numbers(spark, io):
    io.write("numbers", spark.range(0, ROWS, numPartitions=FILES).selectExpr("id", "id % 13 AS k"))


def squares(spark, io):
    io.write_stream("squares", io.read_stream("numbers").selectExpr("id", "id * id AS sq"))
