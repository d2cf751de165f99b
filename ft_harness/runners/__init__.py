"""Processes the tests start and then stop or kill: the demo in the background, a commit or a checkpoint
upload held at a named step."""

# How long a test waits for a process it started before calling it hung. Not a speed bound: the
# untimed tests run at nice 10 beside the cluster scenarios' S3 endpoint at normal priority, and on
# 2 busy cores a child importing Airflow there took 105 s before its first line of work (CI).
HUNG_AFTER_SECONDS = 600
