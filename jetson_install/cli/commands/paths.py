"""`paths`: every folder and file the tool uses, and where each came from (its default, a
variable, the configuration file), as `pipx environment` and `brew config` say theirs. Each
value is asked of the module that uses it; nothing here decides a path."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional

from jetson_install.base.errors import JetsonInstallError
from jetson_install.base.layout import BUILD_CACHE_DIR, INTERPRETER_CACHE
from jetson_install.base.sourced import CONFIG_PREFIX, DEFAULT, Sourced
from jetson_install.base.user_dirs import cache_dir, data_dir, log_dir, under_variable
from jetson_install.catalog.settings import CONFIG_VARIABLE, config_file, read_config, wheelhouse_folder
from jetson_install.cli.commands.version import UV_MISSING, bundled_uv, catalog_revision
from jetson_install.envs.known_dirs import default_environments, known_environments_file
from jetson_install.running.fetch import wheels_cache
from jetson_install.tools import uv
from jetson_install.tools.runner import run_uv

__all__ = ["Place", "paths"]

SCHEMA_VERSION = 1
#: `uv cache dir` answers at once; a uv that hangs is not waited for.
_UV_TIMEOUT = 30


@dataclass(frozen=True)
class Place:
    """One folder or file the tool uses."""

    name: str
    what: str  # what the tool keeps there
    path: Optional[Path]  # None: it cannot be told (`detail` says why)
    source: str  # DEFAULT, the variable that gave it, or "config FILE"
    detail: str = ""  # the catalog's revision, uv's version, a problem

    @property
    def kind(self) -> str:
        """default, variable or configuration."""
        if self.source == DEFAULT:
            return "default"
        return "configuration" if self.source.startswith(CONFIG_PREFIX) else "variable"

    @property
    def exists(self) -> bool:
        return self.path is not None and (self.path.exists() or self.path.is_symlink())

    def to_json(self) -> Dict[str, Any]:
        return {"name": self.name, "what": self.what, "path": str(self.path) if self.path else None,
                "exists": self.exists, "source": self.kind,
                "from": None if self.kind == "default" else self.source[len(CONFIG_PREFIX):]
                if self.kind == "configuration" else self.source,
                "detail": self.detail or None}


def paths() -> List[Place]:
    """Every folder and file the tool uses, in the order a user looks for them."""
    data, cache = data_dir(), cache_dir()
    found = [
        Place("environments", "each target's default environment, envs/TARGET", default_environments(), data.source),
        Place("environment list", "every DIR an install worked on (`jetson-install list` reads it)",
              known_environments_file(), data.source),
        _sourced("logs", "every install's log, one a run", log_dir()),
        Place("checked wheels", "the vendor wheels an install downloaded and checked, by sha256", wheels_cache(),
              cache.source),
        Place("bitsandbytes builds", "bitsandbytes built on this machine", cache.value / BUILD_CACHE_DIR, cache.source),
        Place("interpreter cache", "what each Python binary said it is", cache.value / INTERPRETER_CACHE,
              cache.source),
    ]
    found += _configuration()
    found += [_catalog(), *_uv()]
    return found


def _sourced(name: str, what: str, sourced: Sourced[Path], detail: str = "") -> Place:
    return Place(name, what, sourced.value, sourced.source, detail)


def _configuration() -> List[Place]:
    """The configuration file, and the fleet's wheelhouse where it names one."""
    try:
        config = config_file()
    except JetsonInstallError as exc:  # JETSON_INSTALL_CONFIG names nothing usable: said, not raised
        return [Place("configuration", "index settings, mirrors, a fleet's wheelhouse", None, CONFIG_VARIABLE,
                      exc.message)]
    place = _sourced("configuration", "index settings, mirrors, a fleet's wheelhouse", config)
    try:
        settings = read_config(config.value)
    except JetsonInstallError as exc:
        return [Place(place.name, place.what, place.path, place.source, f"unreadable: {exc.message}")]
    if "wheelhouse" not in settings:
        return [place]
    where = wheelhouse_folder(settings["wheelhouse"])
    return [place, Place("wheelhouse", "the fleet's wheelhouse, tried for the recorded vendor builds", where,
                         f"{CONFIG_PREFIX}{config.value}", "" if where else f"served at {settings['wheelhouse']}")]


def _catalog() -> Place:
    catalog = catalog_revision()
    what = "wheels-index.toml: the channels, their vendor sets and known builds"
    if catalog.file is None:
        return Place("catalog", what, None, DEFAULT, catalog.revision)
    return _sourced("catalog", what, catalog.file, catalog.revision)


def _uv() -> List[Place]:
    bundled = bundled_uv()
    if bundled is None:
        return [Place("uv", "the uv every install runs", None, DEFAULT, UV_MISSING)]
    binary = Place("uv", "the uv every install runs", Path(bundled.binary) if bundled.binary else None, DEFAULT,
                   f"uv {bundled.version}" + ("" if bundled.binary else ", its binary is not listed"))
    answer = run_uv(uv.cache_dir_argv(), timeout=_UV_TIMEOUT)
    what = "uv's own cache of downloads and builds (`uv cache clean` empties it)"
    if not answer.ok or not answer.stdout.strip():
        why = "did not answer in time" if answer.timed_out else (answer.last_stderr_line() or "no answer")
        return [binary, Place("uv cache", what, None, DEFAULT, f"`uv cache dir` failed: {why}")]
    return [binary, _sourced("uv cache", what, under_variable(Path(answer.stdout.strip()),
                                                             ("UV_CACHE_DIR", "XDG_CACHE_HOME")))]
