"""The one root error of the harness and its shallow tree of subclasses.

Every user-facing failure is a `HarnessError`: the CLI prints its message as one red line
and exits with its `exit_code`; a traceback is shown only with `--debug`.
"""

from __future__ import annotations


class HarnessError(Exception):
    """Root of every error the harness raises on purpose."""

    exit_code = 1

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class InputError(HarnessError):
    """Bad user input: a file, a key and what would have been valid."""

    exit_code = 2

    def __init__(self, message: str, file: str | None = None, key: str | None = None):
        where = ": ".join(p for p in (file, key) if p)
        super().__init__(f"{where}: {message}" if where else message)
        self.file = file
        self.key = key


class ResourceBusy(InputError):
    """What a trial needs is held by other running trials for now (a pool's machines):
    the trial waits and asks again, for at most `wait_sec` in all, then fails with this."""

    def __init__(self, message: str, wait_sec: float):
        super().__init__(message)
        self.wait_sec = wait_sec


class TaskError(InputError):
    """A task package failed validation; `problems` holds one line per problem."""

    def __init__(self, problems: list[str]):
        super().__init__("; ".join(problems))
        self.problems = problems


class ConfigError(InputError):
    """A harness or campaign configuration problem."""


class RegistryError(InputError):
    """An unknown name in a registry (substrate, agent, fault); lists the valid names."""

    def __init__(self, kind: str, name: str, valid: list[str]):
        super().__init__(f"unknown {kind} {name!r}; valid: {', '.join(sorted(valid))}")
        self.kind, self.name, self.valid = kind, name, valid


class ToolError(HarnessError):
    """An external tool (terraform, ansible, docker, libvirt) failed."""

    exit_code = 3

    def __init__(self, tool: str, message: str, returncode: int | None = None,
                 command: str | None = None, stderr_tail: str = ""):
        text = f"{tool}: {message}"
        if stderr_tail:
            text += f" -- {stderr_tail.strip().splitlines()[-1][:400]}"
        super().__init__(text)
        self.tool, self.returncode, self.command, self.stderr_tail = (
            tool, returncode, command, stderr_tail)


class TerraformError(ToolError):
    def __init__(self, message: str, returncode: int | None = None, command: str | None = None,
                 stderr_tail: str = ""):
        super().__init__("terraform", message, returncode, command, stderr_tail)


class AnsibleError(ToolError):
    def __init__(self, message: str, returncode: int | None = None, command: str | None = None,
                 stderr_tail: str = ""):
        super().__init__("ansible", message, returncode, command, stderr_tail)


class SubstrateError(ToolError):
    def __init__(self, substrate: str, message: str, stderr_tail: str = ""):
        super().__init__(substrate, message, stderr_tail=stderr_tail)


class PreflightError(HarnessError):
    """The host is not ready for a substrate; the message says how to fix it."""

    exit_code = 4
