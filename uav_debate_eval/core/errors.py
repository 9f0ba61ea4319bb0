"""Errors that mean "the user's input is wrong" (exit status 2), as opposed to bugs."""


class InputError(Exception):
    """Bad input file or argument; the message is one line that names the file and the reason."""


class MissionError(InputError):
    """Malformed mission YAML; the message names the file, line, key and why."""


class ParameterError(InputError):
    """A live node's parameter is out of range or of the wrong kind; the message names the parameter."""
