"""The one module that invokes uv: it builds every uv argument list and reads uv's output.

uv runs with --no-config and with the index variables of the caller's environment
removed, so only the indexes in the plan are ever asked (a stray UV_EXTRA_INDEX_URL
would otherwise let a public torch in). uv "does not read configuration files or
environment variables that are specific to pip" (https://docs.astral.sh/uv/pip/compatibility/),
so those need no scrubbing here.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Dict, List, Mapping, Optional, Sequence

from jetson_install.progress import BUILD, BUILT, DOWNLOAD, DOWNLOADED, PHASE, Event, StepProgress
from jetson_install.redact import credentials
from jetson_install.runner import Completed, run

__all__ = [
    "uv_binary",
    "venv_argv",
    "vendor_install_argv",
    "target_install_argv",
    "pip_check_argv",
    "build_wheel_argv",
    "build_wheel",
    "compile_argv",
    "no_deps_install_argv",
    "lock_compile_argv",
    "locked_install_argv",
    "pip_compile",
    "companions_compile_argv",
    "companions_install_argv",
    "compile_companions",
    "create_venv",
    "install",
    "pip_check",
    "installed_versions",
    "summarize_failure",
    "read_event",
    "parse_size",
    "warnings_in",
]

# Variables that would add indexes, constraints or a different interpreter to our calls.
_SCRUBBED_UV_VARIABLES = (
    "UV_INDEX", "UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "UV_DEFAULT_INDEX", "UV_FIND_LINKS", "UV_NO_INDEX",
    "UV_INDEX_STRATEGY", "UV_CONSTRAINT", "UV_OVERRIDE", "UV_EXCLUDE", "UV_BUILD_CONSTRAINT", "UV_PRERELEASE",
    "UV_PYTHON", "UV_SYSTEM_PYTHON", "UV_BREAK_SYSTEM_PACKAGES", "UV_CONFIG_FILE", "UV_PROJECT_ENVIRONMENT",
)
PROGRAM = "uv"  # shown in plans; the real binary is found at run time
# An index with credentials is passed as `--default-index private=URL` without them; uv reads a
# named index's credentials from UV_INDEX_<NAME>_USERNAME/_PASSWORD (https://docs.astral.sh/uv/
# configuration/indexes/#providing-credentials-directly), so they stay out of the process list.
_INDEX_NAME = "private"
_CREDENTIAL_VARIABLES = ("UV_INDEX_PRIVATE_USERNAME", "UV_INDEX_PRIVATE_PASSWORD")


_FINDING_BINARY = threading.Lock()


def uv_binary() -> str:
    from uv import find_uv_bin

    # find_uv_bin reads sysconfig, whose first read is not thread-safe: two threads at once
    # got EXE as None ("can only concatenate str (not "NoneType") to str").
    with _FINDING_BINARY:
        return find_uv_bin()


def _index_args(default_index: Optional[str]) -> List[str]:
    if not default_index:
        return []
    secret = credentials(default_index)
    return ["--default-index", f"{_INDEX_NAME}={secret.url}" if secret else default_index]


def _credential_env(index: Optional[str]) -> Dict[str, str]:
    secret = credentials(index) if index else None
    if secret is None:
        return {}
    env = {_CREDENTIAL_VARIABLES[0]: secret.username}
    if secret.password is not None:
        env[_CREDENTIAL_VARIABLES[1]] = secret.password
    return env


def venv_argv(python: str, path: str, default_index: Optional[str], system_site_packages: bool = False,
              seed: bool = True) -> List[str]:
    """With `seed`, pip is put in the environment from the default index, so a user's later plain
    `pip install` works there; without it (a lock, which carries pip itself) no index is asked."""
    sees_parent = ["--system-site-packages"] if system_site_packages else []
    if not seed:
        return [PROGRAM, "venv", "--no-config", *sees_parent, "--python", python, path]
    return [PROGRAM, "venv", "--no-config", "--seed", *sees_parent, "--python", python, *_index_args(default_index), path]


def vendor_install_argv(python: str, index: Optional[str], no_index: bool, requirements: Sequence[str]) -> List[str]:
    """Vendor packages only, no dependencies: the vendor index is the only index and can
    supply nothing else, even a package it carries (dependency confusion). A resolved build
    is asked for by its URL with its sha256, so uv installs exactly that file or fails."""
    argv = [PROGRAM, "pip", "install", "--no-config", "--python", python, "--no-deps"]
    if no_index:
        argv.append("--no-index")
    else:
        argv += _index_args(index)
    return argv + list(requirements)


def companions_compile_argv(python: str, output: str, default_index: Optional[str]) -> List[str]:
    """Resolve the companions (read from stdin) on the default index and write them with
    every file's sha256, so they are installed hash-checked and recorded."""
    return [PROGRAM, "pip", "compile", "--no-config", "--python", python, "--generate-hashes", "--no-header",
            "--no-annotate", *_index_args(default_index), "--output-file", output, "-"]


def companions_install_argv(python: str, compiled: str, default_index: Optional[str]) -> List[str]:
    return [PROGRAM, "pip", "install", "--no-config", "--python", python, "--no-deps", "--require-hashes",
            *_index_args(default_index), "--requirement", compiled]


def target_install_argv(
    python: str, requirements: Sequence[str], constraints_file: str, default_index: Optional[str]
) -> List[str]:
    return [
        PROGRAM, "pip", "install", "--no-config", "--python", python,
        "--constraint", constraints_file, *_index_args(default_index), *requirements,
    ]


def compile_argv(python: str, requirements_file: str, constraints_file: str, default_index: Optional[str],
                 output_file: str) -> List[str]:
    """Resolve for `python`'s markers without installing anything."""
    return [
        PROGRAM, "pip", "compile", "--no-config", "--python", python, "--constraint", constraints_file,
        *_index_args(default_index), "--no-header", "--no-annotate", "--output-file", output_file, requirements_file,
    ]


def no_deps_install_argv(python: str, requirements_file: str, default_index: Optional[str]) -> List[str]:
    """Install exactly a resolved list: nothing it names is resolved again."""
    return [
        PROGRAM, "pip", "install", "--no-config", "--python", python, "--no-deps",
        *_index_args(default_index), "--requirements", requirements_file,
    ]


def lock_compile_argv(requirements_file: str, constraints_file: Optional[str], index: Optional[str],
                      output_file: str, python_version: str, python_platform: Optional[str],
                      interpreter: Optional[str], no_deps: bool) -> List[str]:
    """Resolve for a board's platform (or, with `interpreter`, for that interpreter) from one
    index, as PEP 751 pylock.toml: every file with its URL and sha256, the choice of file ours."""
    target = (["--python", interpreter] if interpreter
              else ["--python-version", python_version, "--python-platform", str(python_platform)])
    return [
        PROGRAM, "pip", "compile", "--no-config", *target, *(["--no-deps"] if no_deps else []),
        *(["--constraint", constraints_file] if constraints_file else []), *_index_args(index),
        "--generate-hashes", "--format", "pylock.toml", "--no-header", "--output-file", output_file, requirements_file,
    ]


def locked_install_argv(python: str, lock_file: str) -> List[str]:
    """Install exactly a lock: every file by its URL and hash, no index, nothing resolved."""
    return [
        PROGRAM, "pip", "install", "--no-config", "--python", python, "--no-deps", "--require-hashes", "--no-index",
        "--requirements", lock_file,
    ]


def pip_check_argv(python: str) -> List[str]:
    return [PROGRAM, "pip", "check", "--no-config", "--python", python]


def build_wheel_argv(python: str, source: str, out_dir: str, default_index: Optional[str], isolation: bool) -> List[str]:
    """A wheel of the project in `source`, for `python`; with isolation its build requirements
    come from the default index, without it from `python`'s own environment."""
    argv = [PROGRAM, "build", "--no-config", "--wheel", "--python", python, "--out-dir", out_dir,
            *_index_args(default_index)]
    if not isolation:
        argv.append("--no-build-isolation")
    return [*argv, source]


def _run_uv(argv: Sequence[str], timeout: Optional[float] = None, env: Optional[Mapping[str, str]] = None,
            index: Optional[str] = None, watch: Optional[StepProgress] = None, stdin: Optional[str] = None) -> Completed:
    """Run uv; `watch` (the running step) hears of each download and build as uv announces it."""
    overrides = {"UV_PYTHON_DOWNLOADS": "never", "UV_NO_PROGRESS": "1"}
    overrides.update(env or {})
    overrides.update(_credential_env(index))
    on_line = on_tick = None
    if watch is not None:
        on_tick = watch.tick

        def on_line(stream: str, line: str) -> None:
            event = read_event(line) if stream == "stderr" else None
            if event is not None:
                watch.event(event)

    return run([uv_binary(), *argv[1:]], timeout=timeout, env=overrides,
               unset=_SCRUBBED_UV_VARIABLES + _CREDENTIAL_VARIABLES, on_line=on_line, on_tick=on_tick,
               input_text=stdin)


def compile_companions(python: str, requirements: Sequence[str], output: str,
                       default_index: Optional[str]) -> Completed:
    return _run_uv(companions_compile_argv(python, output, default_index), timeout=600,
                   stdin="\n".join(requirements) + "\n", index=default_index)


def create_venv(python: str, path: str, default_index: Optional[str], system_site_packages: bool = False,
                watch: Optional[StepProgress] = None, seed: bool = True) -> Completed:
    return _run_uv(venv_argv(python, path, default_index, system_site_packages, seed), timeout=600,
                   index=default_index, watch=watch)


def install(argv: Sequence[str], index: Optional[str] = None, watch: Optional[StepProgress] = None) -> Completed:
    """Run an install argv; `index` is the URL (with any credentials) its --default-index came from."""
    return _run_uv(argv, timeout=3600, index=index, watch=watch)


def build_wheel(python: str, source: str, out_dir: str, default_index: Optional[str], isolation: bool,
                env: Optional[Mapping[str, str]] = None, watch: Optional[StepProgress] = None) -> Completed:
    return _run_uv(build_wheel_argv(python, source, out_dir, default_index, isolation), timeout=3600, env=env,
                   index=default_index, watch=watch)


def pip_compile(argv: Sequence[str], index: Optional[str] = None, watch: Optional[StepProgress] = None) -> Completed:
    """Run a compile argv; `index` and `watch` as for install."""
    return _run_uv(argv, timeout=3600, index=index, watch=watch)


def pip_check(python: str) -> Completed:
    result = _run_uv(pip_check_argv(python), timeout=300)
    if result.ok or result.timed_out:
        return result
    from jetson_install.container import sees_parent_environment, visible_distributions

    if not sees_parent_environment(python):
        return result
    return _judge_unseen(result, visible_distributions(python))


_NOT_INSTALLED = re.compile(r"The package `[^`]+` requires `([^`]+)`, but it's not installed")


def _judge_unseen(result: Completed, visible: Mapping[str, str]) -> Completed:
    """uv does not see a --system-site-packages venv's parent (astral-sh/uv#17215), so it calls
    what the parent provides "not installed": judge those lines against what the interpreter
    itself imports, and keep only the real problems."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    from jetson_install.versions import satisfies

    problems, provided = [], 0
    for line in (result.stdout + "\n" + result.stderr).splitlines():
        found = _NOT_INSTALLED.search(line)
        if not found:
            if line.strip().startswith("The package"):
                problems.append(line.strip())
            continue
        try:
            requirement = Requirement(found.group(1))
        except InvalidRequirement:
            problems.append(line.strip())
            continue
        version = visible.get(canonicalize_name(requirement.name))
        if version is not None and (not requirement.specifier or satisfies(version, str(requirement.specifier))):
            provided += 1
        else:
            problems.append(line.strip())
    note = f"{provided} requirement(s) met by the parent environment, which uv does not see"
    if problems:
        return Completed(result.argv, result.returncode, "", "\n".join(problems + [note]) + "\n")
    return Completed(result.argv, 0, f"All installed packages are compatible ({note})\n", "")


def installed_versions(python: str) -> Dict[str, str]:
    """Normalized distribution name -> version, from uv's JSON listing."""
    from packaging.utils import canonicalize_name

    result = _run_uv([PROGRAM, "pip", "list", "--no-config", "--python", python, "--format", "json"], timeout=120)
    if not result.ok:
        return {}
    try:
        rows = json.loads(result.stdout)
    except ValueError:
        return {}
    return {canonicalize_name(row["name"]): row["version"] for row in rows if isinstance(row, dict)}



def summarize_failure(result: Completed) -> str:
    """uv's error line and its deepest cause, as one line (see uv_errors)."""
    if result.timed_out:
        return "uv did not finish in time"
    from jetson_install.uv_errors import read_uv_failure

    return read_uv_failure(result.stderr).summary


# What uv prints into a pipe for each file over 1 MiB and each source build
# (https://github.com/astral-sh/uv/pull/11165), e.g. "Downloading torch (731.1MiB)".
_DOWNLOADING = re.compile(r"^Downloading (?P<name>.+?)(?: \((?P<size>[0-9.]+ ?[KMGT]?i?B)\))?$")
_EVENTS = ((re.compile(r"^Downloaded (?P<name>.+)$"), DOWNLOADED), (re.compile(r"^Building (?P<name>.+)$"), BUILD),
           (re.compile(r"^Built (?P<name>.+)$"), BUILT))
# The stage uv finished, as its summary lines say it: "Resolved 87 packages in 1.20s".
_PHASE = re.compile(r"^(?P<what>Resolved|Prepared|Installed|Uninstalled|Audited|Built) (?P<count>[0-9]+) packages? in ")
_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
          "KB": 1000, "MB": 1000 ** 2, "GB": 1000 ** 3, "TB": 1000 ** 4}


def read_event(line: str) -> Optional[Event]:
    """The download, build or finished stage a line of uv's stderr announces, if any."""
    text = line.strip()
    match = _PHASE.match(text)
    if match:
        return Event(PHASE, f"{match.group('what').lower()} {match.group('count')} package"
                            + ("" if match.group("count") == "1" else "s"))
    match = _DOWNLOADING.match(text)
    if match:
        return Event(DOWNLOAD, match.group("name"), parse_size(match.group("size") or ""))
    for pattern, kind in _EVENTS:
        match = pattern.match(text)
        if match:
            # "obliteratus @ file:///long/path" is shown as its name: the source is in the log.
            return Event(kind, match.group("name").split(" @ ", 1)[0])
    return None


def parse_size(text: str) -> int:
    """Bytes in a size as uv prints it ("2.9MiB"); 0 for anything else."""
    match = re.match(r"^([0-9.]+) ?([KMGT]?i?B)$", text.strip())
    if not match or match.group(2) not in _UNITS:
        return 0
    try:
        return int(float(match.group(1)) * _UNITS[match.group(2)])
    except ValueError:
        return 0


def warnings_in(result: Completed) -> List[str]:
    """uv's own warnings in its output, each once, in order (e.g. a requested extra the package lacks)."""
    found: List[str] = []
    for line in result.stderr.splitlines():
        text = line.strip()
        if text.startswith("warning:"):
            message = text[len("warning:"):].strip()
            if message and message not in found:
                found.append(message)
    return found
