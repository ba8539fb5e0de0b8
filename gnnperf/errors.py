"""The one exception type the CLI turns into a one-line error."""


class GnnperfError(Exception):
    """A user-facing error: its message is one line that names the fix."""
