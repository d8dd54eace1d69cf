"""Error types. Every error a user can cause ends as one line on stderr and a non-zero exit."""


class InfercheckError(Exception):
    """Bad input or an unusable environment: reported as one line, exit code 2."""

    exit_code = 2


class BuildError(InfercheckError):
    """An engine tree or env could not be built (e.g. compiled code on a CPU host)."""


class WorkerError(InfercheckError):
    """A worker subprocess failed (crash, hang, bad engine argument). Exit code 1."""

    exit_code = 1

    def __init__(self, message: str, kind: str = "crash", stderr_tail: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.stderr_tail = stderr_tail
