"""The project's error types and its documented exit codes.

Every error the user can cause carries one line saying what is wrong and where,
and the exact command that fixes it. The CLI prints it; nothing else does.
"""

from __future__ import annotations

from typing import Optional

__all__ = [
    "EXIT_OK",
    "EXIT_FAILED",
    "EXIT_BAD_INPUT",
    "EXIT_UNSUPPORTED",
    "EXIT_INTERRUPTED",
    "EXIT_CHECK_UNREACHABLE",
    "EXIT_CHECK_UNLISTED",
    "EXIT_CHANGED",
    "EXIT_CLOSED_OUTPUT",
    "Stopped",
    "JetsonInstallError",
    "BadInput",
    "Interrupted",
    "AnotherUsers",
    "InvalidReleaseFile",
    "NotAJetson",
    "Unsupported",
    "StepFailed",
    "CatalogError",
    "ElfError",
    "IndexUnreachable",
    "IndexRefused",
    "RegistryError",
    "RegistryUnreachable",
    "RegistryRefused",
    "BlobMismatch",
]

EXIT_OK = 0
#: A required doctor check failed, or an install step failed (the old environment is kept).
EXIT_FAILED = 1
#: Bad input (an unparseable file, a bad option or config value), or the command could not run.
EXIT_BAD_INPUT = 2
#: No Jetson evidence under the root, or the platform is not supported for the target.
EXIT_UNSUPPORTED = 3
#: `channels --check`: an index did not answer.
EXIT_CHECK_UNREACHABLE = 4
#: `channels --check`: the preferred set is there, but not one of its files is a build the catalog records.
EXIT_CHECK_UNLISTED = 5
#: --detailed-exitcode: the environment changed (with --dry-run: would change), as terraform's
#: `plan -detailed-exitcode` says it with 2 (https://developer.hashicorp.com/terraform/cli/commands/plan#detailed-exitcode),
#: which is bad input here.
EXIT_CHANGED = 6
#: Interrupted (Ctrl-C, SIGTERM or SIGHUP); the previous environment is kept.
EXIT_INTERRUPTED = 130
#: stdout or stderr was closed before all was written (`| head -1`, `2>&1 | head -2`): 128 + SIGPIPE,
#: what a shell shows for a command SIGPIPE ended, so `set -o pipefail` still tells it from success.
EXIT_CLOSED_OUTPUT = 141


class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP (how CI, systemd and a closed terminal stop a job), raised in the main
    thread so the run ends exactly as a Ctrl-C ends it: the old environment kept, children ended."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name


class JetsonInstallError(Exception):
    """Base of every error this project raises on purpose."""

    exit_code = EXIT_FAILED

    def __init__(self, message: str, fix: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix

    def __str__(self) -> str:
        return self.message


class BadInput(JetsonInstallError, ValueError):
    exit_code = EXIT_BAD_INPUT


class Interrupted(JetsonInstallError):
    """How a run Ctrl-C, SIGTERM or SIGHUP ended is said: its exit code in --json's error object
    is the one the process ends with."""

    exit_code = EXIT_INTERRUPTED


class AnotherUsers(BadInput):
    """What another user made (a DIR.d root made, seen by a CI runner's user): no permission this
    user could be given makes it theirs to change. The command line's fix runs the same command
    as `owner`."""

    def __init__(self, message: str, owner: str) -> None:
        super().__init__(message, fix=f"run it as the user who made it ({owner})")
        self.owner = owner


class InvalidReleaseFile(BadInput):
    """A platform file exists but cannot be parsed (empty, garbage, truncated)."""


class CatalogError(BadInput):
    """wheels-index.toml (or the user config) is invalid; names the key and line."""


class NotAJetson(JetsonInstallError):
    exit_code = EXIT_UNSUPPORTED


class Unsupported(JetsonInstallError):
    exit_code = EXIT_UNSUPPORTED


class StepFailed(JetsonInstallError):
    """An install step failed; the previous environment is untouched."""

    exit_code = EXIT_FAILED

    def __init__(self, step: str, message: str, fix: Optional[str] = None) -> None:
        super().__init__(message, fix)
        self.step = step


class ElfError(JetsonInstallError):
    """A file is not a 64-bit little-endian ELF object, or is cut short or corrupt (base/elf.py)."""


class IndexUnreachable(JetsonInstallError):
    """A package index did not answer (or answered with an error). Here, not beside the HTTP
    client (tools/index.py): the fixes and the executor name it without reading any index."""


class IndexRefused(JetsonInstallError):
    """The index answered, refusing the credentials (401, 403): its fix is the credentials', not a
    network's, so callers that replace an unreachable index's fix leave this one."""


class RegistryError(JetsonInstallError):
    """A registry's request did not succeed. Here, not beside the client (tools/oci.py): where
    credentials are found (tools/oci_credentials.py) raises them too."""


class RegistryUnreachable(RegistryError):
    """The registry did not answer, or answered with an error."""


class RegistryRefused(RegistryError):
    """The registry (or its token service) refused the credentials it was given, or wanted some."""


class BlobMismatch(RegistryError):
    """A blob arrived with bytes other than its digest: refused, and nothing of it kept."""
