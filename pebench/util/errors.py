"""Errors a user can act on. The CLI prints them as one line, without a traceback."""


class PebenchError(Exception):
    """A problem with the user's input or environment, explained in one line."""

    exit_code = 1


class UsageError(PebenchError):
    """Bad command-line arguments or configuration (exit code 2)."""

    exit_code = 2


class TrainingDiverged(PebenchError):
    """The loss became NaN or infinite; the run is marked failed and its last good checkpoint kept."""


class PositionOutOfRange(PebenchError):
    """A scheme was asked for a position it cannot represent (e.g. learned beyond its table)."""
