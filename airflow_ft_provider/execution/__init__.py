"""How one try of a pipeline stage runs its Spark work and places its partitions.

A try picks its objects once, when it starts, from the stage's connection and settings:

* a **backend** runs the application: ``SubmitBackend`` (``spark-submit``, one Spark application per
  try, connection type ``spark``) or ``ConnectBackend`` (a session on a long-lived Spark Connect
  server, connection type ``spark_connect``; the application runs in the worker);
* a **placement** says where partition data is read and written: ``StagedFiles`` (the worker's local
  disk, uploaded by the partition store) or ``DirectS3a`` (Spark reads and writes ``s3a://`` itself);
  pipelined partitions go where the backend keeps them (Spark Connect: cached views in the server);
* a **workdir** (``TryWorkdir``) is the try's scratch directory on the worker, removed when the try
  ends, or by a later try if the process was killed.

A new way to run stages is a new class here, not a branch in the operator.
"""
