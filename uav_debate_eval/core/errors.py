"""Errors that mean "the user's input is wrong" (exit status 2), as opposed to bugs."""

import contextlib
import os
from collections.abc import Iterator

#: Set (as the tests do) to let a reader's unexpected exception through instead of reporting the file unreadable.
STRICT_READERS_ENV = "UAV_DEBATE_EVAL_STRICT_READERS"


class InputError(Exception):
    """Bad input file or argument; the message is one line that names the file and the reason."""


class MissionError(InputError):
    """Malformed mission YAML; the message names the file, line, key and why."""


class ParameterError(InputError):
    """A live node's parameter is out of range or of the wrong kind; the message names the parameter."""


@contextlib.contextmanager
def reading(what: str) -> Iterator[None]:
    """Around a reader of user files: an exception the reader did not expect on a damaged file becomes an
    InputError naming the file (one line, exit 2), unless STRICT_READERS_ENV is set (the tests), where it is a
    bug to be seen."""
    try:
        yield
    except (InputError, KeyboardInterrupt, MemoryError):
        raise
    except Exception as exc:
        if os.environ.get(STRICT_READERS_ENV):
            raise
        detail = " ".join(str(exc).split())[:160]
        raise InputError(f"{what}: cannot be read ({type(exc).__name__}: {detail})") from None
