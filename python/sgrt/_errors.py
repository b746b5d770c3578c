"""sgrt.Error: every failing call of the shim raises it."""


class Error(Exception):
    """A failed sgrt call.

    Attributes:
        status: the sg_status number (negative), e.g. -9.
        code: its name, e.g. "SG_ERR_SHAPE".
        message: the library's message (sg_last_error()) with its context, or
            the shim's own explanation for a bad Python argument.
    """

    def __init__(self, status, code, message):
        super().__init__(status, code, message)
        self.status = int(status)
        self.code = code
        self.message = message

    def __str__(self):
        return "%s: %s" % (self.code, self.message) if self.message else self.code

    def __repr__(self):
        return "sgrt.Error(%d, %r, %r)" % (self.status, self.code, self.message)
