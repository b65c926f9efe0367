"""airlock: a Python client for the daemon of airlock (`airlock serve`),
the sandbox runtime for code that AI agents write and run.

    from airlock import Sandbox
    with Sandbox() as sbx:
        sbx.files.write("/work/data.csv", "a,b\\n1,2\\n")
        print(sbx.commands.run("wc -l /work/data.csv").stdout)

Standard library only. Shaped as E2B's SDK is (docs/clients.md has the
table of names), so that code written for it ports with renames.
"""

from .code import Context, Execution, ExecutionError, Logs, OutputMessage, Result
from .commands import CommandHandle, CommandResult, ProcessInfo, PtyHandle, PtySize
from .errors import (AirlockError, BusyError, CommandExitError, InvalidRequestError,
                     LimitError, NotFoundError, PolicyError, SandboxGoneError)
from .files import EntryInfo
from .sandbox import Sandbox, SandboxInfo

__all__ = ["Sandbox", "SandboxInfo", "CommandHandle", "CommandResult", "PtyHandle",
           "PtySize", "ProcessInfo", "Context", "Execution", "ExecutionError", "Logs",
           "OutputMessage", "Result",
           "EntryInfo", "AirlockError", "BusyError", "CommandExitError",
           "InvalidRequestError", "LimitError", "NotFoundError", "PolicyError",
           "SandboxGoneError"]
__version__ = "0.1.0"
