"""The command line's options, each declared once; a command names the ones it takes."""

from __future__ import annotations

from typing import Any, Callable, Dict, Tuple

import click

__all__ = ["OPTIONS", "INSTALL_OPTIONS", "with_options"]

ROOT_HELP = "Read the platform from DIR instead of / (or sample:NAME, see `jetson-install samples`)."

# Each option once: what it is called, and how click takes it; commands name the ones they take.
OPTIONS: Dict[str, Tuple[Tuple[str, ...], Dict[str, Any]]] = {
    "root": (("--root",), dict(default="/", envvar="JETSON_INSTALL_ROOT", metavar="DIR", help=ROOT_HELP)),
    "l4t": (("--l4t", "l4t"), dict(metavar="VERSION", envvar="JETSON_L4T_VERSION",
                                   help="Use this L4T release (e.g. 36.4.3) instead of what the root's files say "
                                        "(for containers whose release file is empty or missing).")),
    "soc": (("--soc", "soc"), dict(metavar="SOC", envvar="JETSON_INSTALL_SOC",
                                   help="Use this SoC (tegra264 Thor, tegra234 Orin) where the device tree cannot be "
                                        "read (containers); it tells Thor from Orin on L4T R39.")),
    "json": (("--json", "as_json"), dict(is_flag=True, help="Print one JSON object on stdout.")),
    "no-verify": (("--no-verify",), dict(is_flag=True, help="Skip the doctor's GPU checks (for image builds without "
                                                            "GPU access); torch is still checked.")),
    "cpu-index": (("--cpu-index",), dict(metavar="URL", help="With --preflight: an index with CPU builds of the "
                                                             "channel's torch version.")),
    "preflight": (("--preflight",), dict(is_flag=True, help="Any aarch64 machine: the channel's environment with CPU "
                                                            "torch, checked for CPU; never Jetson GPU evidence.")),
    "ref": (("--ref",), dict(metavar="REF", help="Git tag, branch or commit of the source.")),
    "source": (("--source",), dict(metavar="PATH|URL", help="OBLITERATUS from this checkout or git URL.")),
    "allow-insecure-index": (("--allow-insecure-index",), dict(is_flag=True, help="Accept plain-http indexes on "
                                                                                  "remote hosts.")),
    "vendor-fallback": (("--vendor-fallback",), dict(is_flag=True, help="Use the channel's documented fallback vendor "
                                                                        "source (when the first is down).")),
    "default-index": (("--default-index",), dict(metavar="URL", envvar="JETSON_INSTALL_DEFAULT_INDEX",
                                                 help="Replace the general index (default: uv's own).")),
    "vendor-index": (("--vendor-index",), dict(metavar="URL", envvar="JETSON_INSTALL_VENDOR_INDEX",
                                               help="Replace the channel's vendor index (a mirror of the same builds).")),
    "python": (("--python", "python"), dict(metavar="PATH", help="Use this interpreter (default: a system Python of "
                                                                 "the channel's version).")),
    "use-existing-torch": (("--use-existing-torch",), dict(is_flag=True, help="Keep the CUDA torch the interpreter "
                                                           "already has (an L4T PyTorch image, a system install); "
                                                           "download no vendor build.")),
    "with": (("--with", "added"), dict(multiple=True, metavar="REQUIREMENT", help="Also install this (a package "
                                       "name, a git URL or a project folder) under the stack's constraints; "
                                       "repeatable. A re-run keeps what an environment was given.")),
    "venv": (("--venv",), dict(metavar="DIR", help="Environment location (default: a per-user data directory).")),
    "bitsandbytes": (("--bitsandbytes", "bitsandbytes"), dict(
        metavar="build[=VERSION|PATH]", help="Build bitsandbytes on this board for its GPU (where no Jetson build "
                                             "exists): the newest release this torch accepts, a release, or a local "
                                             "checkout; cached per user.")),
}
INSTALL_OPTIONS = ("json", "no-verify", "cpu-index", "preflight", "with", "ref", "source", "allow-insecure-index",
                   "vendor-fallback",
                   "default-index", "vendor-index", "python", "use-existing-torch", "venv", "bitsandbytes", "l4t", "soc", "root")


def with_options(*names: str, **changed: Dict[str, Any]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The options `names` from the table; `changed` replaces some of one's settings."""
    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        for name in names:
            declarations, settings = OPTIONS[name]
            command = click.option(*declarations, **{**settings, **changed.get(name.replace("-", "_"), {})})(command)
        return command
    return decorate
