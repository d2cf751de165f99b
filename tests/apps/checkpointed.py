"""Stage callables of the checkpointed-stage tests (Spark Connect: ``fn(spark, io)``)."""

ROWS = 12_000
FILES = 8


def numbers(spark, io):
    io.write("numbers", spark.range(0, ROWS, numPartitions=FILES).selectExpr("id", "id % 13 AS k"))


def squares(spark, io):
    io.write_stream("squares", io.read_stream("numbers").selectExpr("id", "id * id AS sq"))


def no_squares(spark, io):
    """Every row filtered out: micro-batches without rows."""
    io.write_stream("squares", io.read_stream("numbers").where("id < 0").selectExpr("id", "id * id AS sq"))


def totals(spark, io):
    """A stateful aggregation across micro-batches: its state is in the RocksDB state store."""
    totals = io.read_stream("numbers").groupBy("k").agg({"id": "sum", "*": "count"})
    io.write_stream("totals", totals.withColumnRenamed("sum(id)", "total"), output_mode="complete")


def expected_totals():
    """What ``totals`` writes, as sorted (k, total, count) rows."""
    return sorted(
        (k, sum(i for i in range(ROWS) if i % 13 == k), sum(1 for i in range(ROWS) if i % 13 == k))
        for k in range(13)
    )


def distinct_keys(spark, io):
    """dropDuplicates across micro-batches (append: each key once, in the batch that first saw it)."""
    io.write_stream("keys", io.read_stream("numbers").select("k").dropDuplicates(["k"]))


def aggregate_appended(spark, io):
    io.write_stream("totals", io.read_stream("numbers").groupBy("k").count())


def two_streams(spark, io):
    io.write_stream("totals", io.read_stream("numbers").join(io.read_stream("numbers"), "id"))


def slow_squares(spark, io):
    """A slow operator (a sink would do the same): 0.4 ms a row, about 0.6 s per input file."""

    def slow(batches):  # shipped to the Spark server by value
        import time

        for batch in batches:
            time.sleep(batch.num_rows * 0.0004)
            yield batch

    stream = io.read_stream("numbers")
    io.write_stream("squares", stream.mapInArrow(slow, stream.schema).selectExpr("id", "id * id AS sq"))
