"""Every name jetson-install gives to what it keeps on disk: one place, imported by all.

For --venv DIR:

    DIR                         -> DIR.d/env-<id>  (a symlink: what the user activates)
    DIR.d/env-<id>/             an environment; its state folder jetson-install/ holds
                                what the install recorded (names below)
    DIR.d/.env-<id>.building    marks an environment being built as jetson-install's own
    DIR.d/.removing-env-<id>    an environment being removed (renamed first)
    DIR.d/.lock                 held while jetson-install works on DIR
    DIR.d/.jetson-install-owner the tool's mark: DIR.d is its own (a random token, see below)
    DIR.d/env-<id>/jetson-install/.jetson-install-owner   the same token: the environment is DIR.d's own
    DIR.d/previous              the environment to roll back to
    DIR.d/failed-env-<id>-evidence.json   a discarded environment's doctor evidence

Per user: the data folder's environments.txt (every DIR worked on) and envs/<target> (the
default DIRs); the cache folder's builds/ (bitsandbytes built here) and wheels/ (the vendor
wheels downloaded and checked); the log folder's logs.

A leaf module: it imports nothing of the project, so every stage may use it.
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "STATE_DIR", "STAGING", "CONSTRAINTS_FILE", "EVIDENCE_FILE", "PLAN_FILE", "COMPLETE_MARK", "RECORD_FILE", "MANIFEST_FILE",
    "LOCK_FILE", "FETCHED_DIR", "REQUIREMENTS_FILE", "ADDED_FILE", "CHECK_COMMANDS_FILE", "COMPANIONS_INPUT",
    "COMPANIONS_PYLOCK", "VENDOR_INPUT", "VENDOR_PYLOCK", "FETCHED_FILE", "WHEELS_CACHE_DIR", "EXCLUDES_FILE",
    "ACTIVATE_FILE", "GIVEN_FILE",
    "GIVEN_WHEELS_DIR", "KEPT_RESOLUTION_FILE", "TO_INSTALL_FILE", "HOME_SUFFIX", "HOME_LOCK", "PREVIOUS_FILE",
    "FAILED_EVIDENCE", "REMOVING_PREFIX", "KNOWN_ENVIRONMENTS", "ENVIRONMENTS_DIR", "BUILD_CACHE_DIR",
    "INTERPRETER_CACHE", "CHECKED_FILE", "OWNER_MARK", "OWNER_MARK_PREFIX",
    "staging_placeholder", "home_of", "state_of",
]

#: The state folder inside every environment jetson-install makes.
STATE_DIR = "jetson-install"
#: Where a plan's steps name the new environment before it exists: DIR.d/<new>.
STAGING = "<new>"

# -- in the state folder ------------------------------------------------------------------
#: What the target installs under, and what pip.conf and the activate scripts keep in force.
CONSTRAINTS_FILE = "constraints.txt"
#: The doctor's evidence from the install's verify step.
EVIDENCE_FILE = "evidence.json"
#: The plan's fingerprint the environment was made from, and its source's identity.
PLAN_FILE = "plan.json"
#: Written last: the environment is complete and may become the user's.
COMPLETE_MARK = "complete"
#: What the vendor step installed: files, sha256, wheel tags, RECORD digests, torch's CUDA.
RECORD_FILE = "vendor.json"
#: Every vendor file's sha256, as the wheel the install downloaded and checked lists it in its
#: own RECORD (envs/manifest.py); the doctor compares the installed files with it.
MANIFEST_FILE = "vendor-files.json"
#: The lock an environment was installed from.
LOCK_FILE = "lock.txt"
#: Where a lock's files fetched from an OCI registry wait for the lock step (removed once installed).
FETCHED_DIR = "fetched"
#: What the check step's `uv pip check` passed on: the state of the environment's distributions.
CHECKED_FILE = "checked.txt"
#: The target's requirements when its source URL carries a token (readable by the user only).
REQUIREMENTS_FILE = "requirements.txt"
#: What --with (and `add`) put on the stack, one requirement a line: a re-run keeps them.
ADDED_FILE = "added.txt"
#: --check-command's commands, one a line: the check step and the doctor run them; a re-run keeps them.
CHECK_COMMANDS_FILE = "check-commands.txt"
#: The companions asked for, and as the default index resolved them: each file's URL and sha256
#: (uv names its pylock output pylock.toml or pylock.NAME.toml).
COMPANIONS_INPUT = "companions.in"
COMPANIONS_PYLOCK = "pylock.companions.toml"
#: The vendor packages only uv can find (on its default index), asked for by version or range,
#: and the files it resolved them to.
VENDOR_INPUT = "vendor.in"
VENDOR_PYLOCK = "pylock.vendor.toml"
#: The files the fetch step downloaded and checked, each by its path in the per-user cache and
#: its sha256: what the vendor (or lock) step installs, with no index.
FETCHED_FILE = "fetched.txt"
#: --use-existing-torch: the names uv must leave to the parent interpreter (UV_EXCLUDE),
#: what was kept, the stand-in wheels handed to the resolver, and what is left to install.
EXCLUDES_FILE = "excludes.txt"
#: What the activate scripts export (UV_CONSTRAINT, and TRITON_PTXAS_*_PATH where the install
#: pointed Triton at the board's assembler), for the doctor's probes to see the same.
ACTIVATE_FILE = "activate.json"
GIVEN_FILE = "existing-torch.json"
GIVEN_WHEELS_DIR = "given"
KEPT_RESOLUTION_FILE = "resolution.txt"
TO_INSTALL_FILE = "install.txt"

# -- beside the environments ------------------------------------------------------------------
HOME_SUFFIX = ".d"
HOME_LOCK = ".lock"
#: In DIR.d, written when the tool makes it; in each complete environment's state folder, a copy.
#: Its token is random, so no folder a user made, copied or edited by hand carries it by accident,
#: and an environment is DIR.d's own only if its copy matches DIR.d's.
OWNER_MARK = ".jetson-install-owner"
OWNER_MARK_PREFIX = "jetson-install made this folder; its token: "
PREVIOUS_FILE = "previous"
#: The evidence kept of an environment the install discarded, by the environment's name.
FAILED_EVIDENCE = "failed-{name}-" + EVIDENCE_FILE
#: What is being removed is first renamed to this prefix, so an interrupted removal is seen.
REMOVING_PREFIX = ".removing-"

# -- per user ---------------------------------------------------------------------------------
#: In the per-user data folder: each DIR jetson-install worked on, one a line (`list` reads it).
KNOWN_ENVIRONMENTS = "environments.txt"
#: In the per-user data folder: where the default --venv of each target is (envs/<target>).
ENVIRONMENTS_DIR = "envs"
#: In the per-user cache folder: the bitsandbytes wheels built on this machine.
BUILD_CACHE_DIR = "builds"
#: In the per-user cache folder: the vendor wheels the fetch step downloaded and checked, by
#: sha256 (wheels/<sha256>/<file>), so a later install of the same file downloads nothing.
WHEELS_CACHE_DIR = "wheels"
#: In the per-user cache folder: what each Python binary said it is, by its path, size and time.
INTERPRETER_CACHE = "interpreters.json"


def home_of(venv: Path) -> Path:
    """DIR.d for DIR: where the real environments are."""
    return venv.with_name(venv.name + HOME_SUFFIX)


def staging_placeholder(venv: str) -> str:
    """How a plan writes the environment it is about to make: DIR.d/<new>."""
    return f"{venv}{HOME_SUFFIX}/{STAGING}"


def state_of(environment: Path) -> Path:
    return environment / STATE_DIR
