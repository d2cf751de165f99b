"""What the tests run against, each a real process on this machine: the S3 endpoint (moto server) and
the proxies in front of it, PostgreSQL, Redis, a StatsD socket, Spark (local, standalone cluster,
Connect) and the Spark host of its own."""
