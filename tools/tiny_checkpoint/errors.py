"""The one error type of the generator: a message that names the file, field or tensor at fault."""


class TinyCheckpointError(Exception):
    """A bad input (config path, config field, option) the user can fix; the CLI prints it and exits 2."""
