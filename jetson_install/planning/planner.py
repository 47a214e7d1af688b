"""Platform + catalog + the user's options -> Plan: picks the route and makes its steps.

Planning changes nothing and reads no index: `plan` prints the plan, `obliteratus` carries
it out. Each route's planning lives in its own module (routes/); this module reads the
target's source, and hands over (the options were checked against each other as PlanOptions).
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path
from typing import List, Optional, Sequence, Tuple
from urllib.parse import unquote, urlsplit

from packaging.requirements import InvalidRequirement, Requirement

from jetson_install.base.errors import BadInput, JetsonInstallError
from jetson_install.base.git_urls import split_git_url, without_credentials
from jetson_install.base.requirements import TargetRequirement
from jetson_install.base.toml_file import loads_toml
from jetson_install.board.platform import Platform
from jetson_install.catalog.catalog import Catalog
from jetson_install.catalog.targets import Target
from jetson_install.planning.options import PlanOptions
from jetson_install.planning.plan import Plan, Route
from jetson_install.planning.routes.download import check_channel, plan_download
from jetson_install.tools import git

__all__ = ["make_plan", "target_requirement", "source_extra", "additions", "addition_kind", "check_commands",
           "check_git_ref"]

_ARCHIVE_SUFFIXES = (".whl", ".tar.gz", ".zip")
# What uv installs a direct reference from: a git repository over https, http, ssh or file (uv
# 0.13 refuses any other with "Unsupported Git URL scheme ... expected one of `https:`, `ssh:`,
# or `file:`", and takes http too), an archive over https, http or file
# (https://docs.astral.sh/uv/pip/compatibility/ and uv's own parse of `NAME @ URL`).
_GIT_SCHEMES = ("https", "http", "ssh", "file")
_ARCHIVE_SCHEMES = ("https", "http", "file")


def _uv_installs_from(url: str) -> bool:
    """Whether uv can install from `url` (a `git+` URL or an archive's), by its scheme: an
    unknown one is refused before the plan, not at the target step in uv's words."""
    scheme = url.split("://", 1)[0].lower()
    if scheme.startswith("git+"):
        return scheme[len("git+"):] in _GIT_SCHEMES
    return scheme in _ARCHIVE_SCHEMES
# git check-ref-format's rules (https://git-scm.com/docs/git-check-ref-format), plus '@' and
# '#', which split a direct reference's URL, and a leading '-', which git would take as an option.
_REF_FORBIDDEN = re.compile(r"[\x00-\x20\x7f~^:?*\[\\@#]")


def check_git_ref(ref: str) -> None:
    """Refuse what is not a git branch, tag or commit name, before anything runs."""
    problem = None
    if not ref:
        problem = "is empty"
    elif _REF_FORBIDDEN.search(ref):
        character = _REF_FORBIDDEN.search(ref).group()  # type: ignore[union-attr]
        problem = f"contains {character!r}, which no git ref name has"
    elif ref.startswith(("-", "/", ".")) or ref.endswith(("/", ".", ".lock")) or ".." in ref or "//" in ref \
            or "/." in ref:
        problem = "is not a valid git ref name"
    if problem:
        raise BadInput(f"--ref {ref!r} {problem}",
                       fix="give a tag, branch or commit, e.g. --ref v0.1.3 (see: git ls-remote --tags REPOSITORY)")


def target_requirement(target: Target, source: Optional[str], ref: Optional[str]) -> Optional[TargetRequirement]:
    """A direct-reference requirement: the target is never resolved by name from an index,
    where its name is an empty placeholder (obliteratus 0.0.1's METADATA: "Reserved name placeholder.
    No functionality."). None for a target with no project of its own (the stack alone)."""
    if target.distribution is None or target.git is None:
        if source is not None or ref is not None:
            option, value = ("--source", source) if source is not None else ("--ref", ref)
            # Option words only: the planner does not have the command as typed (its other options, a
            # --dry-run), which a whole command here would drop.
            fix = (f"run the same command with --with {source} in place of --source {source}" if source is not None
                   else "drop --ref (a git project goes on the stack at a ref as --with 'NAME @ git+URL@REF')")
            raise BadInput(f"{option} {value}: `{target.id}` has no source of its own; a project to put on the "
                           "stack is an addition", fix=fix)
        return None
    if ref is not None:
        check_git_ref(ref)
    name = target.distribution
    clone = f"git clone {target.git}"
    if source is None:
        return TargetRequirement(name, (), f"git+{target.git}@{ref or target.ref}")
    if "://" in source:
        archive = source.endswith(_ARCHIVE_SUFFIXES)
        if not _uv_installs_from(source if archive or source.startswith("git+") else f"git+{source}"):
            raise BadInput(f"--source {source}: not a URL uv installs from (a git repository over https, http, ssh "
                           "or file, or an archive)",
                           fix=f"give the repository's URL, e.g. --source {target.git}, or a checkout's folder")
        if archive:
            if ref:
                raise BadInput(f"--ref {ref}: a ref needs a git source, and {source} is an archive",
                               fix="drop --ref, or pass the repository URL as --source")
            return TargetRequirement(name, (), source)
        url = source if source.startswith("git+") else f"git+{source}"
        _, slash, after_host = url.split("://", 1)[1].partition("/")
        if ref and not slash:
            raise _ref_after_a_host(source, ref)
        if ref and "@" in after_host:
            raise BadInput(f"--source {source} already names a ref, and --ref {ref} names another",
                           fix="give the ref once: either in the URL (…@REF) or with --ref")
        return TargetRequirement(name, (), f"{url}@{ref}" if ref else url)
    path = Path(source).resolve()
    if not path.is_dir():
        raise BadInput(f"--source {source}: no such folder", fix=f"pass the {target.title} checkout: {clone}")
    if not (path / "pyproject.toml").is_file() and not (path / "setup.py").is_file():
        raise BadInput(f"--source {source}: no Python project there (no pyproject.toml)",
                       fix=f"pass the {target.title} checkout: {clone}")
    if ref:
        return TargetRequirement(name, (), f"git+{path.as_uri()}@{ref}")
    return TargetRequirement(name, (), path.as_uri())


def _ref_after_a_host(source: str, ref: str) -> BadInput:
    """`--source https://[TOKEN@]HOST --ref REF`: the requirement would be git+https://TOKEN@HOST@REF,
    which every URL parser reads as the user TOKEN@HOST at the host REF (uv and git, by RFC 3986's
    authority, https://www.rfc-editor.org/rfc/rfc3986#section-3.2), and split_git_url finds no
    ref in; the repository's path after the host (`/` at its root) puts the ref in the path."""
    plain = without_credentials(source)
    # The token to ~/.netrc, as docs/fleets.md has it: off the command line, and git and uv read it there.
    token = (f"put the token in ~/.netrc (machine {urlsplit(source).hostname} login USER password TOKEN, "
             "mode 0600), then ") if plain != source else ""
    host = urlsplit(source).hostname or "HOST"
    return BadInput(f"--source {source} has no path after its host, so --ref {ref} cannot follow it: every URL "
                    f"parser would read {host}@{ref} as a user at the host {ref}",
                    fix=f"{token}give the repository's path after the host (/ for a repository at the host's "
                        f"root): --source {plain}/ --ref {ref}")


def source_extra(target: Target, requirement: Optional[TargetRequirement]) -> Tuple[Optional[str], Optional[str]]:
    """The target's quantization extra where its source has one, and where that was read: the
    source's own pyproject.toml where it can be read here (a checkout; a local repository at
    its ref, from git's objects), else the target's data (`quantization_extra_since`) for a
    remote git ref, which planning does not fetch (it reads nothing over the network)."""
    if requirement is None or target.quantization_extra is None:
        return None, None
    extra, url = target.quantization_extra, requirement.url
    if url.startswith("file://"):
        folder = Path(unquote(urlsplit(url).path))
        return _listed_extra(_read(folder / "pyproject.toml"), extra), f"{folder}/pyproject.toml"
    if url.startswith("git+"):
        repository, ref = split_git_url(url)
        why = "is remote, and planning reads nothing over the network"
        if repository.startswith("file://"):
            folder = Path(unquote(urlsplit(repository).path))
            text = git.file_at(folder, ref or "HEAD", "pyproject.toml")
            if text is not None:
                return _listed_extra(text, extra), f"pyproject.toml at {ref or 'HEAD'} in {folder}"
            why = f"has no pyproject.toml git can read in {folder}"
        since = f": '{extra}' from {target.quantization_extra_since} on" if target.quantization_extra_since else ""
        return target.extra_for(ref), f"wheels-index.toml's rule{since}; the source at {ref or 'HEAD'} {why}"
    return extra, "wheels-index.toml; an archive is not read before the install"


def _read(path: Path) -> Optional[str]:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _listed_extra(text: Optional[str], extra: str) -> Optional[str]:
    """`extra` unless the pyproject.toml `text` lists its extras without it (a dynamic or
    unreadable list keeps it: uv then says whether it exists)."""
    try:
        project = loads_toml(text).get("project", {}) if text is not None else None
    except JetsonInstallError:
        return extra
    if not isinstance(project, dict) or "optional-dependencies" in project.get("dynamic", []):
        return extra
    extras = project.get("optional-dependencies", {})
    return extra if not isinstance(extras, dict) or extra in extras else None


def addition_kind(text: str) -> str:
    """How `additions` reads a --with value: "folder" (a local project), "git" (a git URL, bare or
    as `NAME @ URL`), "url" (any other URL: an archive's) or "name" (what an index resolves)."""
    value = text.strip()
    if value.startswith((".", "/", "~")) or (os.sep in value and "://" not in value and "@" not in value):
        return "folder"
    url = value if "://" in value and " @ " not in value else None
    if url is None:
        try:
            url = Requirement(value).url
        except InvalidRequirement:
            return "name"  # additions refuses it, in its own words
    if not url:
        return "name"
    return "git" if url.lower().startswith("git+") else "url"


def additions(requirements: Sequence[str], given_as: str = "--with") -> Tuple[str, ...]:
    """--with's requirements as uv takes them: a name with its version and extras, a URL, or a
    local project (made absolute, so a re-run from elsewhere means the same folder). `given_as`:
    how the user gave them, which a refusal and its fix name (`--with`, or `add`'s arguments
    as `jetson-install add`)."""
    found: List[str] = []
    for text in requirements:
        value = text.strip()
        if addition_kind(value) == "folder":
            path = Path(value).expanduser().resolve()
            if not (path / "pyproject.toml").is_file() and not (path / "setup.py").is_file():
                raise BadInput(f"{given_as} {text}: no Python project there (no pyproject.toml or setup.py)",
                               fix=f"give a project folder, a package name (e.g. {given_as} transformers) or a git URL")
            value = str(path)
        elif "://" in value and " @ " not in value:
            if not _uv_installs_from(value):
                raise BadInput(f"{given_as} {text}: not a URL uv installs from",
                               fix="give a git URL as git+https://HOST/OWNER/REPO@REF, or a package name")
        else:
            try:
                Requirement(value)
            except InvalidRequirement as exc:
                reason = str(exc).splitlines()[0] if str(exc) else "not PEP 508"
                raise BadInput(f"{given_as} {text!r} is not a requirement: {reason}",
                               fix=f"give a package name with an optional version, e.g. {given_as} 'transformers>=4.40'"
                               ) from None
        if value and value not in found:
            found.append(value)
    return tuple(found)


def check_commands(commands: Sequence[str]) -> Tuple[str, ...]:
    """--check-command's commands as the check step runs them (split as a shell would, no shell
    started); one that does not split into words is refused."""
    found: List[str] = []
    for text in commands:
        value = text.strip()
        try:
            words = shlex.split(value)
        except ValueError as exc:
            raise BadInput(f"--check-command {text!r}: {exc}",
                           fix="quote the command as one argument, e.g. --check-command 'python -c \"import ultralytics\"'"
                           ) from None
        if not words:
            raise BadInput("--check-command is empty",
                           fix="give the command to run in the environment, e.g. --check-command 'yolo checks', or drop it")
        if value not in found:
            found.append(value)
    return tuple(found)


def make_plan(platform: Platform, catalog: Catalog, options: PlanOptions) -> Plan:
    """The plan for `options` on `platform`: the route the options and the catalog's channel
    for the board pick, and its steps."""
    target = catalog.targets[options.target]
    requirement = target_requirement(target, options.source, options.ref)
    extra, extra_from = source_extra(target, requirement)
    base = Plan(route=Route(), target=target, platform=platform, channel=None, supported=False, reason="", remedy="",
                python_abi=None, interpreter=options.interpreter, venv=str(options.venv), vendor=None,
                settings=options.settings, requirement=requirement, constraints=(), steps=(), verify=options.verify,
                extra=extra, extra_from=extra_from, additions=additions(options.added),
                check_commands=check_commands(options.check_commands))
    match = catalog.match(platform)
    # A route's module is imported where the options take it: most runs take the download route.
    if options.existing is not None:
        from jetson_install.planning.routes.existing_torch import plan_existing

        return plan_existing(base, options.existing, match.channel, match.reason, match.remedy)
    checked = check_channel(platform, match.channel, match.reason, match.remedy, target,
                            preview=options.preflight and os.uname().machine != "aarch64")
    if options.preflight:
        from jetson_install.planning.routes.preflight import plan_preflight

        return plan_preflight(base, checked, options.cpu_index)
    return plan_download(base, checked, options.fallback, options.build_choice())
