"""The error of an application that uses its declared inputs and outputs wrongly (``stage_io``), in a
module of its own so that the helpers ``stage_io`` uses can raise it too. Stdlib only."""


class StageIOError(RuntimeError):
    """The application used its declared inputs or outputs wrongly."""
