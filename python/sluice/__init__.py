from ._sluice import *  # noqa: F401,F403
from ._sluice import Error, OutOfMemory, WorkFailed  # noqa: F401
