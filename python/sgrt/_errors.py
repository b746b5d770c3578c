"""sgrt.Error and its subclasses: every failing call of the shim raises one.

Each sg_status maps onto a subclass that is also the Python built-in exception
a caller would expect, so `except ValueError` and `except FileNotFoundError`
work as with other libraries, and `except sgrt.Error` catches them all:

    SG_ERR_INVALID_ARG, SG_ERR_RANGE, SG_ERR_SHAPE, SG_ERR_ARITY,
    SG_ERR_ATTRIBUTE, SG_ERR_DUPLICATE, SG_ERR_CYCLE, SG_ERR_DANGLING
                                              InvalidArgumentError (ValueError)
    SG_ERR_DTYPE                              DtypeError (TypeError)
    SG_ERR_FORMAT, SG_ERR_TRUNCATED, SG_ERR_CHECKSUM, SG_ERR_VERSION
                                              FormatError (ValueError)
    SG_ERR_NOT_FOUND                          NotFoundError (LookupError)
    SG_ERR_IO                                 FileError (OSError); a file that does not exist:
                                              MissingFileError (FileNotFoundError)
    SG_ERR_NO_MEMORY                          OutOfMemoryError (MemoryError)
    SG_ERR_TIMEOUT                            WaitTimeoutError (TimeoutError)
    SG_ERR_COMM                               CommError (ConnectionError)
    SG_ERR_DENIED                             DeniedError (PermissionError)
    SG_ERR_UNSUPPORTED                        UnsupportedError (NotImplementedError)
    anything else (SG_ERR_STATE, SG_ERR_INTERNAL, SG_ERR_DEVICE, ...)
                                              RuntimeFailure (RuntimeError)
"""


class Error(Exception):
    """A failed sgrt call.

    Attributes:
        status: the sg_status number (negative), e.g. -9.
        code: its name, e.g. "SG_ERR_SHAPE".
        message: the library's message (sg_last_error()) with its context, or
            the shim's own explanation for a bad Python argument.
    """

    def __init__(self, status, code, message):
        # Exception's own constructor: the OSError subclasses would read (status, code, message) as
        # (errno, strerror, filename).
        Exception.__init__(self, status, code, message)
        self.status = int(status)
        self.code = code
        self.message = message

    def __str__(self):
        return "%s: %s" % (self.code, self.message) if self.message else self.code

    def __repr__(self):
        return "sgrt.%s(%d, %r, %r)" % (type(self).__name__, self.status, self.code, self.message)

    def __reduce__(self):
        return (make, (self.status, self.code, self.message))


class InvalidArgumentError(Error, ValueError):
    """A bad argument, shape, range, attribute or graph structure."""


class DtypeError(Error, TypeError):
    """A dtype that does not fit (SG_ERR_DTYPE)."""


class FormatError(Error, ValueError):
    """A malformed, truncated, corrupted or too new file or message."""


class NotFoundError(Error, LookupError):
    """A named tensor, op or entry that does not exist (SG_ERR_NOT_FOUND)."""


class FileError(Error, OSError):
    """A file could not be opened, read, written or mapped (SG_ERR_IO)."""


class MissingFileError(FileError, FileNotFoundError):
    """SG_ERR_IO for a file that does not exist."""


class OutOfMemoryError(Error, MemoryError):
    """An allocation failed (SG_ERR_NO_MEMORY)."""


class WaitTimeoutError(Error, TimeoutError):
    """A wait ran past its deadline (SG_ERR_TIMEOUT)."""


class CommError(Error, ConnectionError):
    """The transport failed or a peer went away (SG_ERR_COMM)."""


class DeniedError(Error, PermissionError):
    """Refused: a wrong job token, or a permission not granted (SG_ERR_DENIED)."""


class UnsupportedError(Error, NotImplementedError):
    """An op, dtype or feature this library does not have (SG_ERR_UNSUPPORTED)."""


class RuntimeFailure(Error, RuntimeError):
    """The other failures: a call in the wrong state, a device failure, an internal error."""


_BY_CODE = {
    "SG_ERR_INVALID_ARG": InvalidArgumentError, "SG_ERR_RANGE": InvalidArgumentError,
    "SG_ERR_SHAPE": InvalidArgumentError, "SG_ERR_ARITY": InvalidArgumentError,
    "SG_ERR_ATTRIBUTE": InvalidArgumentError, "SG_ERR_DUPLICATE": InvalidArgumentError,
    "SG_ERR_CYCLE": InvalidArgumentError, "SG_ERR_DANGLING": InvalidArgumentError,
    "SG_ERR_DTYPE": DtypeError,
    "SG_ERR_FORMAT": FormatError, "SG_ERR_TRUNCATED": FormatError, "SG_ERR_CHECKSUM": FormatError,
    "SG_ERR_VERSION": FormatError,
    "SG_ERR_NOT_FOUND": NotFoundError,
    "SG_ERR_IO": FileError,
    "SG_ERR_NO_MEMORY": OutOfMemoryError,
    "SG_ERR_TIMEOUT": WaitTimeoutError,
    "SG_ERR_COMM": CommError,
    "SG_ERR_DENIED": DeniedError,
    "SG_ERR_UNSUPPORTED": UnsupportedError,
}


def make(status, code, message):
    """The Error subclass instance for a status (its name in `code`)."""
    cls = _BY_CODE.get(code, RuntimeFailure)
    if cls is FileError and message and ("No such file or directory" in message or "does not exist" in message):
        cls = MissingFileError
    return cls(status, code, message)
