"""The lifecycle both Graph and Session follow: close() releases the C
object and may be called twice; `with` closes on exit; garbage collection
closes what the caller forgot (never raising from __del__)."""


class Closeable:
    def close(self):  # pragma: no cover - each class defines it
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
