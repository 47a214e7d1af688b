"""The container lane: the Dockerfile for a Jetson image and the image's entrypoint.

The image (`jetson-install dockerfile`): FROM an image known to match the board's channel
(wheels-index.toml `containers`), the existing-torch install at build time (routes/
existing_torch.py), and an entrypoint (`jetson-install container-entrypoint`) that refuses a
host the image was not built for before it runs the doctor and the command.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Optional, Tuple

from jetson_install.errors import BadInput

if TYPE_CHECKING:
    from jetson_install.catalog import Channel
    from jetson_install.platform import Platform
    from jetson_install.release_files import L4T

__all__ = ["dockerfile_text", "HostFacts", "host_facts", "host_mismatch", "Start", "start_check", "START_EVIDENCE",
           "START_STATUS"]

# -- the image -----------------------------------------------------------------------------

#: Where the entrypoint leaves what its doctor found, for the HEALTHCHECK and for people.
START_EVIDENCE = "/tmp/jetson-install/start-evidence.json"
START_STATUS = "/tmp/jetson-install/start-status"
#: For hosts (and tests) where /etc/nv_tegra_release or the device tree is not mounted.
HOST_L4T_VARIABLE = "JETSON_INSTALL_HOST_L4T"
HOST_CAPABILITY_VARIABLE = "JETSON_INSTALL_HOST_CAPABILITY"
_TEMPLATE = Path(__file__).parent / "Dockerfile.template"


def dockerfile_text(platform: "Platform", channel: "Channel", base: Optional[str], regenerate: str) -> str:
    """The Dockerfile for `channel` on `platform`'s release: FROM `base`, else the first image
    wheels-index.toml knows to match the channel."""
    from jetson_install import __version__

    if base is None:
        if not channel.containers:
            raise BadInput(f"no container image is known to carry a CUDA torch for channel {channel.id}",
                           fix="name the image to build on: jetson-install dockerfile --base IMAGE")
        base = channel.containers[0].image
    assert platform.l4t is not None
    device = platform.module or platform.family
    capability = platform.compute_capability or ""
    values = {
        "@VERSION@": __version__,
        "@CHANNEL_TITLE@": channel.title,
        "@CHANNEL@": channel.id,
        "@L4T@": str(platform.l4t),
        "@L4T_MAJOR@": str(platform.l4t.major),
        "@FOR_DEVICE@": f", {device} (compute capability {capability or 'unknown'})" if device else "",
        "@ARGS@": regenerate,
        "@BASE@": base,
        "@CAPABILITY@": capability,
        "@STATUS_FILE@": START_STATUS,
    }
    text = _TEMPLATE.read_text()
    for placeholder, value in values.items():
        text = text.replace(placeholder, value)
    return text


@dataclass(frozen=True)
class HostFacts:
    """What the host says about itself inside the container, and where it was read."""

    l4t: Optional["L4T"]
    l4t_source: str
    capability: Optional[str]
    capability_source: str


def host_facts(root: Path, environ: Mapping[str, str]) -> HostFacts:
    """The host's L4T release (from the /etc/nv_tegra_release the NVIDIA container runtime
    mounts, never the image's dpkg database) and the GPU's compute capability."""
    from jetson_install.errors import InvalidReleaseFile
    from jetson_install.release_files import parse_l4t, parse_nv_tegra_release

    l4t, l4t_source = None, "/etc/nv_tegra_release"
    if environ.get(HOST_L4T_VARIABLE):
        try:
            l4t = parse_l4t(environ[HOST_L4T_VARIABLE])
        except BadInput as exc:
            raise BadInput(f"{HOST_L4T_VARIABLE}={environ[HOST_L4T_VARIABLE]!r}: {exc.message}",
                           fix=f"set {HOST_L4T_VARIABLE} to a release such as 36.4.3") from None
        l4t_source = HOST_L4T_VARIABLE
    else:
        try:
            l4t = parse_nv_tegra_release((root / "etc" / "nv_tegra_release").read_bytes())[0]
        except (OSError, InvalidReleaseFile):
            l4t = None
    capability, capability_source = environ.get(HOST_CAPABILITY_VARIABLE) or None, HOST_CAPABILITY_VARIABLE
    if capability is None:
        from jetson_install.platform import L4TOverride, detect

        try:
            capability = detect(root, L4TOverride(str(l4t), l4t_source) if l4t else None).compute_capability
        except BadInput:
            capability = None
        capability_source = "/proc/device-tree/compatible"
    return HostFacts(l4t, l4t_source, capability, capability_source)


def host_mismatch(host: HostFacts, environ: Mapping[str, str]) -> Optional[Tuple[str, str]]:
    """(message, fix) when the host is not what the image was built for, else None."""
    built_major = environ.get("JETSON_INSTALL_IMAGE_L4T_MAJOR", "")
    built_capability = environ.get("JETSON_INSTALL_IMAGE_CAPABILITY", "")
    built = f"L4T R{built_major}" + (f", compute capability {built_capability}" if built_capability else "")
    rebuild = "build the image for this host: run `jetson-install dockerfile` on it"
    if host.l4t is None:
        return (f"this image is built for {built}, and the host's L4T is unknown: {host.l4t_source} is missing or empty",
                f"run it with the NVIDIA container runtime (--runtime nvidia), which mounts it, "
                f"or set {HOST_L4T_VARIABLE}=<the host's release>")
    if str(host.l4t.major) != built_major:
        return f"this image is built for {built}, and the host runs L4T R{host.l4t} ({host.l4t_source})", rebuild
    if built_capability and host.capability and host.capability != built_capability:
        return (f"this image is built for {built}, and the host's GPU has compute capability {host.capability} "
                f"({host.capability_source})", rebuild)
    return None


@dataclass(frozen=True)
class Start:
    """What the entrypoint found: the host it refused (message, fix), or the platform and
    channel it matched, with the strict doctor's report then."""

    refused: Optional[Tuple[str, str]]
    platform: Optional["Platform"] = None
    channel: Optional["Channel"] = None
    l4t: Optional["L4T"] = None


def start_check(environ: Mapping[str, str]) -> Start:
    """The entrypoint's host check: the host's L4T major (and capability) must be the image's,
    and its L4T release must be in the channel the image was built for."""
    from jetson_install.catalog import load_catalog
    from jetson_install.platform import L4TOverride, detect

    host = host_facts(Path("/"), environ)
    mismatch = host_mismatch(host, environ)
    if mismatch is not None:
        return Start(mismatch)
    assert host.l4t is not None
    platform = detect(Path("/"), L4TOverride(str(host.l4t), host.l4t_source))
    channel = load_catalog().match(platform).channel
    built_channel = environ.get("JETSON_INSTALL_IMAGE_CHANNEL", "")
    if channel is None or channel.id != built_channel:
        return Start((f"this image is built for channel {built_channel}, and the host's L4T R{host.l4t} "
                      f"({host.l4t_source}) is {'channel ' + channel.id if channel else 'in no channel'}",
                      "build the image for this host: run `jetson-install dockerfile` on it"))
    return Start(None, platform, channel, host.l4t)
