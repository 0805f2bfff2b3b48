"""Errors a user can cause: one clear sentence that names the fix, shown without a traceback."""


class NinferError(Exception):
    """A user-facing error. Its message is one sentence that says what to do."""


class ContextLengthError(NinferError):
    """The prompt (plus what must be generated) does not fit the model's context."""
