"""sluice.lazy: not built yet (see the module's docstring)."""

available: bool

def __getattr__(name: str) -> object: ...
