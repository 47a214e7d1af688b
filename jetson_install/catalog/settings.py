"""Where the indexes come from: command line, environment, user config file, or defaults.

Each value keeps its source, so `plan` can show a fleet operator why a mirror was used.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Tuple
from urllib.parse import urlsplit

from jetson_install.base.errors import BadInput
from jetson_install.base.hosts import is_loopback_host
from jetson_install.base.sourced import CONFIG_PREFIX, Sourced
from jetson_install.base.toml_file import TomlData
from jetson_install.base.user_dirs import config_dir

__all__ = ["IndexSettings", "CONFIG_VARIABLE", "config_path", "config_file", "read_config", "load_index_settings",
           "check_index_url", "wheelhouse_index", "wheelhouse_folder"]

#: The variable that names a fleet's configuration file instead of the user's.
CONFIG_VARIABLE = "JETSON_INSTALL_CONFIG"

#: The configuration's settings and what each must be.
CONFIG_SCHEMA = Path(__file__).with_name("config.schema.json")


@dataclass(frozen=True)
class IndexSettings:
    """The indexes a command reads, each with where it came from (option, configuration, channel)."""

    vendor_index: Sourced[Optional[str]]  # value None: the channel's own vendor source
    default_index: Sourced[Optional[str]]  # value None: uv's own default index
    allow_insecure: bool
    # Further sources of the vendor builds, tried in order after the vendor index: --mirror's,
    # then the configuration's mirrors, then its wheelhouse (as the PEP 503 index it carries).
    mirrors: Tuple[Sourced[str], ...] = ()


def config_path() -> Path:
    return config_file().value


def config_file() -> Sourced[Path]:
    """The configuration file in use (it may not exist), and where its path came from."""
    explicit = os.environ.get(CONFIG_VARIABLE)
    if explicit is not None:
        if not explicit.strip():
            # Set but empty: a fleet script's unset variable, not a wish for the public indexes.
            raise BadInput("JETSON_INSTALL_CONFIG is set but empty",
                           fix="point JETSON_INSTALL_CONFIG at the fleet's config.toml, or unset it")
        path = Path(explicit)
        if not path.is_file():
            # A fleet's typo here must not quietly send installs to the public indexes.
            what = "is not a file" if path.exists() else "no such file"
            raise BadInput(f"JETSON_INSTALL_CONFIG={explicit}: {what}",
                           fix="point JETSON_INSTALL_CONFIG at the fleet's config.toml, or unset it")
        return Sourced(path, CONFIG_VARIABLE)
    folder = config_dir()
    return Sourced(folder.value / "config.toml", folder.source)


def read_config(path: Path) -> Dict[str, Any]:
    """The settings of the configuration file at `path`, validated; {} where there is none."""
    if not path.is_file():
        if path.exists() or path.is_symlink():
            raise BadInput(f"{path}: is not a file (the configuration must be a TOML file)",
                           fix=f"remove or rename {path}, then write the settings into a file of that name")
        return {}

    return TomlData(path, "jetson-install plan obliteratus", CONFIG_SCHEMA).data


def load_index_settings(
    vendor_index: Optional[str],
    vendor_index_source: str,
    default_index: Optional[str],
    default_index_source: str,
    allow_insecure: bool,
    mirrors: Sequence[str] = (),
) -> IndexSettings:
    """Merge the command line (or its environment variables) over the config file; `mirrors`
    (--mirror) come before the config file's, which are kept."""
    path = config_path()
    config = read_config(path)

    def pick(given: Optional[str], given_source: str, key: str, fallback_source: str) -> Sourced[Optional[str]]:
        if given:
            return Sourced(given, given_source)
        if key in config:
            return Sourced(config[key], f"{CONFIG_PREFIX}{path}")
        return Sourced(None, fallback_source)

    vendor = pick(vendor_index, vendor_index_source, "vendor_index", "wheels-index.toml")
    default = pick(default_index, default_index_source, "default_index", "uv default")
    insecure = allow_insecure or bool(config.get("allow_insecure_index", False))
    for setting, option in ((vendor, "--vendor-index"), (default, "--default-index")):
        if setting.value is not None:
            where = option if setting.source == option else f"{option} (from {setting.source})"
            check_index_url(setting.value, where, insecure)
    sources = [Sourced(url, "--mirror") for url in mirrors]
    sources += [Sourced(url, f"{CONFIG_PREFIX}{path} mirrors") for url in config.get("mirrors", ())]
    if "wheelhouse" in config:
        sources.append(Sourced(wheelhouse_index(config["wheelhouse"]), f"{CONFIG_PREFIX}{path} wheelhouse"))
    for mirror in sources:
        _check_mirror(mirror.value, "--mirror" if mirror.source == "--mirror" else mirror.source, insecure)
    unique: Dict[str, Sourced[str]] = {}
    for mirror in sources:
        unique.setdefault(mirror.value, mirror)  # named twice: tried once, where it was first named
    return IndexSettings(vendor, default, insecure, tuple(unique.values()))


def _check_mirror(url: str, where: str, insecure: bool) -> None:
    # Here, not at the top: only a mirror or a wheelhouse can name a registry, and most runs name neither.
    from jetson_install.base.oci_ref import is_oci, parse_reference

    if is_oci(url):
        parse_reference(url, where)  # a registry: https, or plain http where insecure is allowed
    else:
        check_index_url(url, where, insecure)


def wheelhouse_index(location: str) -> str:
    """The index a wheelhouse (`jetson-install wheelhouse DIR`) carries: DIR/simple/, as a
    file URL for a folder on this machine; a wheelhouse pushed to a registry (oci://) is read
    there as it is."""
    from jetson_install.base.oci_ref import is_oci  # only a wheelhouse's setting can name a registry

    if is_oci(location):
        return location  # a registry's wheelhouse: its blobs, by the lock's sha256
    # Here, not at the top: only a wheelhouse's index needs the lock's layout.
    from jetson_install.catalog.lock_file import SIMPLE_DIR

    folder = wheelhouse_folder(location)
    if folder is None:
        return f"{location.rstrip('/')}/{SIMPLE_DIR}/"
    return f"{folder.as_uri()}/{SIMPLE_DIR}/"


def wheelhouse_folder(location: str) -> Optional[Path]:
    """The folder on this machine a wheelhouse setting names; None for a URL or a registry."""
    from jetson_install.base.oci_ref import is_oci  # only a wheelhouse's setting can name a registry

    if is_oci(location) or urlsplit(location).scheme in ("http", "https", "file"):
        return None
    return Path(location).expanduser().absolute()


def check_index_url(url: str, where: str, allow_insecure: bool) -> None:
    """Remote indexes must use https; plain http only on loopback or when explicitly allowed."""
    example = "give a full URL such as https://mirror.example/simple"
    if url != url.strip() or " " in url:
        raise BadInput(f"{where}: {url!r} contains spaces", fix=example)
    # uv parses URLs as browsers do (WHATWG): it drops tabs and newlines and reads a backslash as
    # a slash, so 'http://192.0.2.1\\@127.0.0.1/' goes to 192.0.2.1. Such URLs are refused outright.
    odd = next((c for c in url if c == "\\" or c.isspace() or ord(c) < 32 or ord(c) == 127), None)
    if odd is not None:
        raise BadInput(f"{where}: {url!r} contains {_describe(odd)}, which URL parsers read differently", fix=example)
    try:
        parts = urlsplit(url)
        _ = parts.port  # reading it raises ValueError for a port that is not a number
    except ValueError as exc:
        raise BadInput(f"{where}: {url!r} is not a valid URL ({exc})", fix=example) from None
    if parts.scheme == "file" and not parts.path:
        raise BadInput(f"{where}: {url!r} names no directory", fix="give a local index as file:///path/to/simple")
    if parts.scheme == "file" and parts.netloc not in ("", "localhost"):
        # uv, pip and this tool read file:// as this machine: a host there is never reached.
        raise BadInput(f"{where}: {url!r} names the host {parts.netloc}, and a file URL is read on this machine",
                       fix="give a local index as file:///path/to/simple")
    if parts.scheme in ("https", "file"):
        if parts.scheme == "https" and not parts.hostname:
            raise BadInput(f"{where}: {url!r} has no host", fix=example)
        return
    if parts.scheme != "http" or not parts.hostname:
        raise BadInput(f"{where}: {url!r} is not an http(s) or file URL", fix=example)
    if is_loopback_host(parts.hostname) or allow_insecure:
        return
    raise BadInput(
        f"{where}: {url} uses plain http to a remote host, so packages could be altered in transit",
        fix=f"use {url.replace('http://', 'https://', 1)}, or accept the risk by adding --allow-insecure-index",
    )


def _describe(character: str) -> str:
    return "a backslash" if character == "\\" else f"the character {character!r}"
