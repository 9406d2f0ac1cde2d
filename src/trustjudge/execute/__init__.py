"""Running code a model wrote, confined: a separate process with time, memory and process limits, no
network, a fresh temporary folder and a headless plotting backend (layer 3, beside ``audit``).

:class:`LocalExecutor` runs on this machine; :class:`Executor` is the interface a container runner can
implement. :class:`StoredExecutor` keeps results in the judgment store (keyed by the code's hash and the
runner's settings), so a rerun executes nothing.
"""

from ._cache import StoredExecutor, execution_key
from ._local import ExecutionLimits, Executor, LocalExecutor, namespaces_work
from ._results import STATUSES, ExecutionResult, OutputFile

__all__ = ["STATUSES", "ExecutionLimits", "ExecutionResult", "Executor", "LocalExecutor", "OutputFile",
           "StoredExecutor", "execution_key", "namespaces_work"]
