"""The one module that builds uv's argument lists and reads uv's output; it runs nothing
(runner.run_uv does, with `environment_for` below), so a plan can show exactly what will run.

uv runs with --no-config and with the index variables of the caller's environment
removed, so only the indexes in the plan are ever asked (a stray UV_EXTRA_INDEX_URL
would otherwise let a public torch in). uv "does not read configuration files or
environment variables that are specific to pip" (https://docs.astral.sh/uv/pip/compatibility/),
so those need no scrubbing here.

No credential reaches uv's command line, nor, through uv, git's: an index's go to uv in its
environment (`environment_for`), and a `git+` requirement is given without its URL's, which
its git gets from its environment as jetson-install's own git does (git_urls).
"""

from __future__ import annotations

import re
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from jetson_install.base.git_urls import credential_environment
from jetson_install.base.process import Completed
from jetson_install.base.redact import credentials
from jetson_install.base.versions import satisfies
from jetson_install.tools.progress import BUILD, BUILT, DOWNLOAD, DOWNLOADED, PHASE, Event

__all__ = [
    "PROGRAM",
    "environment_for",
    "venv_argv",
    "wheel_install_argv",
    "files_compile_argv",
    "target_install_argv",
    "pip_check_argv",
    "cache_dir_argv",
    "newest_release_argv",
    "build_wheel_argv",
    "compile_argv",
    "no_deps_install_argv",
    "lock_compile_argv",
    "locked_install_argv",
    "summarize_failure",
    "judge_unseen",
    "judge_sbsa_tags",
    "accepted_note",
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


# uv applies the `tool.uv.sources` of a folder it builds or resolves, and of a workspace any
# folder above it declares, even with --no-config (a pyproject.toml planted in the temporary
# folder redirected a lock's packages, one above a user's checkout an install's); --no-sources
# reads "the standards-compliant, publishable package metadata"
# (https://docs.astral.sh/uv/reference/cli/#uv-build--no-sources): every command that may build
# or resolve the target carries it.
_NO_SOURCES = "--no-sources"


def _index_args(default_index: Optional[str]) -> List[str]:
    if not default_index:
        return []
    secret = credentials(default_index)
    return ["--default-index", f"{_INDEX_NAME}={secret.url}" if secret else default_index]


def environment_for(indexes: Sequence[str], argv: Sequence[str], sources: Sequence[str] = ()
                    ) -> Tuple[Dict[str, str], Tuple[str, ...]]:
    """(variables to set, variables to remove) for running `argv`: the caller's index settings
    removed, the credentials of the one index among `indexes` (the plan's, with their
    credentials) that argv names as `private=URL` given to uv out of its command line, and
    those of the git URLs among `sources` (requirements, with their credentials, that argv or
    its requirements files name without them: git_urls.requirement_without_credentials) for uv's git."""
    urls = [line.rpartition(" @ ")[2] for line in sources]
    overrides = {"UV_PYTHON_DOWNLOADS": "never", "UV_NO_PROGRESS": "1",
                 **credential_environment([url for url in urls if url.startswith("git+")])}
    named = next((part.split("=", 1)[1] for part in argv if part.startswith(f"{_INDEX_NAME}=")), None)
    for index in indexes:
        secret = credentials(index)
        if named is None or secret is None or secret.url != named:
            continue
        overrides[_CREDENTIAL_VARIABLES[0]] = secret.username
        if secret.password is not None:
            overrides[_CREDENTIAL_VARIABLES[1]] = secret.password
        break
    return overrides, _SCRUBBED_UV_VARIABLES + _CREDENTIAL_VARIABLES


def venv_argv(python: str, path: str, default_index: Optional[str], system_site_packages: bool = False,
              seed: bool = True) -> List[str]:
    """With `seed`, pip is put in the environment from the default index, so a user's later plain
    `pip install` works there; without it (a lock, which carries pip itself) no index is asked."""
    sees_parent = ["--system-site-packages"] if system_site_packages else []
    if not seed:
        return [PROGRAM, "venv", "--no-config", *sees_parent, "--python", python, path]
    return [PROGRAM, "venv", "--no-config", "--seed", *sees_parent, "--python", python, *_index_args(default_index), path]


def wheel_install_argv(python: str, wheel: str) -> List[str]:
    """One wheel file, without dependencies and without an index (a bitsandbytes built here)."""
    return [PROGRAM, "pip", "install", "--no-config", "--python", python, "--no-deps", "--no-index", wheel]


def files_compile_argv(python: str, requirements_file: str, output: str, default_index: Optional[str],
                       no_deps: bool) -> List[str]:
    """What uv resolves `requirements_file` to on the default index for `python`, as PEP 751
    pylock.toml: every file with its URL and sha256, for the fetch step to download and check
    (`no_deps`: those packages alone)."""
    return [PROGRAM, "pip", "compile", "--no-config", _NO_SOURCES, "--python", python,
            *(["--no-deps"] if no_deps else []), "--format", "pylock.toml", "--no-header", *_index_args(default_index), "--output-file", output,
            requirements_file]


def target_install_argv(
    python: str, requirements: Sequence[str], constraints_file: str, default_index: Optional[str]
) -> List[str]:
    return [
        PROGRAM, "pip", "install", "--no-config", _NO_SOURCES, "--python", python,
        "--constraint", constraints_file, *_index_args(default_index), *requirements,
    ]


def compile_argv(python: str, requirements_file: str, constraints_file: str, default_index: Optional[str],
                 output_file: str) -> List[str]:
    """Resolve for `python`'s markers without installing anything."""
    return [
        PROGRAM, "pip", "compile", "--no-config", _NO_SOURCES, "--python", python, "--constraint", constraints_file,
        *_index_args(default_index), "--no-header", "--no-annotate", "--output-file", output_file, requirements_file,
    ]


def no_deps_install_argv(python: str, requirements_file: str, default_index: Optional[str]) -> List[str]:
    """Install exactly a resolved list: nothing it names is resolved again."""
    return [
        PROGRAM, "pip", "install", "--no-config", _NO_SOURCES, "--python", python, "--no-deps",
        *_index_args(default_index), "--requirements", requirements_file,
    ]


def lock_compile_argv(requirements_file: str, constraints_file: Optional[str], index: Optional[str],
                      output_file: str, python_version: str, python_platform: Optional[str],
                      interpreter: Optional[str], no_deps: bool) -> List[str]:
    """Resolve for a board's platform (or, with `interpreter`, for that interpreter) from one
    index, as PEP 751 pylock.toml: every file with its URL and sha256, the choice of file ours."""
    # --no-sources is a defense here: no command hands this resolution a project folder any more
    # (the lock's target is a wheel: its built one, or one of the metadata its pyproject.toml
    # states; `lock --with` and `inspect` refuse folders and URLs),
    # and one that did would have uv build it under a workspace planted above it.
    target = (["--python", interpreter] if interpreter
              else ["--python-version", python_version, "--python-platform", str(python_platform)])
    return [
        PROGRAM, "pip", "compile", "--no-config", _NO_SOURCES, *target, *(["--no-deps"] if no_deps else []),
        *(["--constraint", constraints_file] if constraints_file else []), *_index_args(index),
        "--generate-hashes", "--format", "pylock.toml", "--no-header", "--output-file", output_file, requirements_file,
    ]


def locked_install_argv(python: str, lock_file: str) -> List[str]:
    """Install exactly a lock (or the files the fetch step checked): every file by its URL and
    hash, no index, nothing resolved."""
    return [
        PROGRAM, "pip", "install", "--no-config", "--python", python, "--no-deps", "--require-hashes", "--no-index",
        "--requirements", lock_file,
    ]


def pip_check_argv(python: str) -> List[str]:
    return [PROGRAM, "pip", "check", "--no-config", "--python", python]


def newest_release_argv(python_version: str, default_index: Optional[str]) -> List[str]:
    """The newest release of the requirements on stdin that `python_version` can install, as
    `NAME==VERSION` lines, from the default index (uv's own, or the one given), nothing installed."""
    return [PROGRAM, "pip", "compile", "--no-config", "--no-deps", "--no-header", "--no-annotate", "--quiet",
            "--python-version", python_version, *_index_args(default_index), "-"]


def cache_dir_argv() -> List[str]:
    """Where the tool's uv keeps its cache: read without uv's configuration files, as every run
    of it is ($UV_CACHE_DIR, else the XDG cache folder's uv/:
    https://docs.astral.sh/uv/reference/storage/#cache-directory)."""
    return [PROGRAM, "cache", "dir", "--no-config"]


def build_wheel_argv(python: str, source: str, out_dir: str, default_index: Optional[str], isolation: bool) -> List[str]:
    """A wheel of the project in `source`, for `python`; with isolation its build requirements
    come from the default index, without it from `python`'s own environment (never from a
    `tool.uv.sources` of the project's, nor of a uv workspace a folder above it declares)."""
    argv = [PROGRAM, "build", "--no-config", _NO_SOURCES, "--wheel", "--python", python, "--out-dir", out_dir,
            *_index_args(default_index)]
    if not isolation:
        argv.append("--no-build-isolation")
    return [*argv, source]


# The patterns of uv's output below are strings, compiled (and cached by `re`) on first use: a
# no-op re-run, which starts no uv, never compiles them.
_NOT_INSTALLED = r"The package `[^`]+` requires `([^`]+)`, but it's not installed"


def judge_unseen(result: Completed, visible: Mapping[str, str]) -> Completed:
    """uv does not see a --system-site-packages venv's parent (astral-sh/uv#17215), so it calls
    what the parent provides "not installed": judge those lines against what the interpreter
    itself imports, and keep only the real problems."""
    problems, provided = [], 0
    for line in (result.stdout + "\n" + result.stderr).splitlines():
        found = re.search(_NOT_INSTALLED, line)
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


_OTHER_PLATFORM = r"The package `([^`]+)` was built for a different platform"
# NVIDIA's aarch64 nvidia-cusparselt-cu13 0.8.x wheels are named for manylinux2014_aarch64 (what
# an installer picks them by) but their WHEEL file records `py3-none-manylinux2014_sbsa`, a
# platform no interpreter has, so a wheel-tag check calls them "built for a different platform"
# though they install and run; fixed in 0.9.1, while torch pins 0.8.x
# (https://github.com/newton-physics/newton/pull/3582).
_SBSA_PLATFORM = r"^manylinux\w*_sbsa$"


def judge_sbsa_tags(result: Completed, wheel_tags: Mapping[str, Sequence[str]], machine: str) -> Completed:
    """Keep uv pip check's problems, less its "built for a different platform" lines for the
    distributions whose WHEEL file names only an SBSA platform, on an aarch64 interpreter (SBSA
    is the Arm server flavour of aarch64): those are NVIDIA's mislabel, said as a note."""
    problems, mislabelled = [], []
    for line in (result.stdout + "\n" + result.stderr).splitlines():
        found = re.search(_OTHER_PLATFORM, line)
        if found:
            name = canonicalize_name(found.group(1))
            tags = wheel_tags.get(name, ())
            if machine == "aarch64" and tags and all(re.match(_SBSA_PLATFORM, tag.split("-")[-1]) for tag in tags):
                mislabelled.append(f"{name} (its WHEEL file says {', '.join(tags)})")
                continue
        if line.strip().startswith("The package") or "requirement(s) met by the parent" in line:
            problems.append(line.strip())
    if not mislabelled:
        return result
    note = "accepted as aarch64: " + "; ".join(mislabelled)
    if any(line.startswith("The package") for line in problems):
        return Completed(result.argv, result.returncode, "", "\n".join(problems + [note]) + "\n")
    return Completed(result.argv, 0, f"All installed packages are compatible ({'; '.join(problems + [note])})\n", "")


def accepted_note(result: Completed) -> Optional[str]:
    """What a passing check accepted that uv itself did not (judge_unseen, judge_sbsa_tags)."""
    found = re.match(r"All installed packages are compatible \((.+)\)$", result.stdout.strip())
    return found.group(1) if found else None


def summarize_failure(result: Completed) -> str:
    """uv's error line and its deepest cause, as one line (see uv_errors)."""
    if result.timed_out:
        return "uv did not finish in time"
    # Here, not at the top: uv's failure patterns are read only when uv failed.
    from jetson_install.tools.uv_errors import read_uv_failure

    return read_uv_failure(result.stderr).summary


# What uv prints into a pipe for each file over 1 MiB and each source build
# (https://github.com/astral-sh/uv/pull/11165), e.g. "Downloading torch (731.1MiB)".
_DOWNLOADING = r"^Downloading (?P<name>.+?)(?: \((?P<size>[0-9.]+ ?[KMGT]?i?B)\))?$"
_EVENTS = ((r"^Downloaded (?P<name>.+)$", DOWNLOADED), (r"^Building (?P<name>.+)$", BUILD),
           (r"^Built (?P<name>.+)$", BUILT))
# The stage uv finished, as its summary lines say it: "Resolved 87 packages in 1.20s".
_PHASE = r"^(?P<what>Resolved|Prepared|Installed|Uninstalled|Audited|Built) (?P<count>[0-9]+) packages? in "
_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
          "KB": 1000, "MB": 1000 ** 2, "GB": 1000 ** 3, "TB": 1000 ** 4}


def read_event(line: str) -> Optional[Event]:
    """The download, build or finished stage a line of uv's stderr announces, if any."""
    text = line.strip()
    match = re.match(_PHASE, text)
    if match:
        return Event(PHASE, f"{match.group('what').lower()} {match.group('count')} package"
                            + ("" if match.group("count") == "1" else "s"))
    match = re.match(_DOWNLOADING, text)
    if match:
        return Event(DOWNLOAD, match.group("name"), parse_size(match.group("size") or ""))
    for pattern, kind in _EVENTS:
        match = re.match(pattern, text)
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
