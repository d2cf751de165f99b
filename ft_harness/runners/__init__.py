"""Processes the tests start and then stop or kill: the demo in the background, a commit or a checkpoint
upload held at a named step."""
