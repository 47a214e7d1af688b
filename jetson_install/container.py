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

__all__ = ["dockerfile_text", "HostFacts", "host_facts", "host_mismatch", "host_line", "Start", "start_check",
           "START_EVIDENCE", "START_STATUS"]

# -- the image -----------------------------------------------------------------------------

#: Where the entrypoint leaves what its doctor found, for the HEALTHCHECK and for people.
START_EVIDENCE = "/tmp/jetson-install/start-evidence.json"
START_STATUS = "/tmp/jetson-install/start-status"
#: For hosts (and tests) where /etc/nv_tegra_release or the device tree is not mounted.
HOST_L4T_VARIABLE = "JETSON_INSTALL_HOST_L4T"
HOST_CAPABILITY_VARIABLE = "JETSON_INSTALL_HOST_CAPABILITY"
#: For containers that cannot read /proc/device-tree, where L4T R39 runs on Thor and Orin alike.
HOST_SOC_VARIABLE = "JETSON_INSTALL_HOST_SOC"
DEVICE_TREE = "/proc/device-tree/compatible"
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
    soc = platform.soc or ""
    values = {
        "@VERSION@": __version__,
        "@CHANNEL_TITLE@": channel.title,
        "@CHANNEL@": channel.id,
        "@L4T@": str(platform.l4t),
        "@L4T_MAJOR@": str(platform.l4t.major),
        "@FOR_DEVICE@": (f", {device} ({soc + ', ' if soc else ''}compute capability {capability or 'unknown'})"
                         if device else ""),
        # The build has no device tree: the SoC goes in as an option, so that R39 (Thor and
        # Orin alike) resolves to the channel this file was made for.
        "@SOC_OPTION@": f" --soc {soc}" if soc else "",
        "@SOC@": soc,
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
    soc: Optional[str] = None
    soc_source: str = DEVICE_TREE


def host_facts(root: Path, environ: Mapping[str, str]) -> HostFacts:
    """The host's L4T release (from the /etc/nv_tegra_release the NVIDIA container runtime
    mounts, never the image's dpkg database), its SoC and the GPU's compute capability.

    The SoC comes from JETSON_INSTALL_HOST_SOC, else the device tree, else the SoC of the
    L4T release's SoCs that has JETSON_INSTALL_HOST_CAPABILITY."""
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
    from jetson_install.platform import L4TOverride, SocOverride, detect

    given_soc = environ.get(HOST_SOC_VARIABLE) or None
    try:
        read = detect(root, L4TOverride(str(l4t), l4t_source) if l4t else None,
                      soc_override=SocOverride(given_soc, HOST_SOC_VARIABLE) if given_soc else None)
    except BadInput:
        if given_soc:
            raise  # a JETSON_INSTALL_HOST_SOC that names no SoC is the user's to fix
        read = None
    soc = read.soc if read is not None else None
    soc_source = HOST_SOC_VARIABLE if given_soc else DEVICE_TREE
    capability = environ.get(HOST_CAPABILITY_VARIABLE) or None
    capability_source = HOST_CAPABILITY_VARIABLE
    if soc is None and capability is not None and l4t is not None:
        soc = _soc_with_capability(l4t.major, capability)
        soc_source = HOST_CAPABILITY_VARIABLE
    if capability is None:
        capability = read.compute_capability if read is not None else None
        capability_source = soc_source
    return HostFacts(l4t, l4t_source, capability, capability_source, soc, soc_source)


def _soc_with_capability(major: int, capability: str) -> Optional[str]:
    """The one SoC L4T R`major` runs on whose GPU has `capability` (None: none, or several)."""
    from jetson_install.platform_data import platform_data

    data = platform_data()
    facts = data.majors.get(major)
    candidates = facts.socs if facts is not None and facts.socs else tuple(data.socs)
    found = {data.socs[name].family: name for name in candidates
             if name in data.socs and data.socs[name].compute_capability == capability}
    return next(iter(found.values())) if len(found) == 1 else None


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
        read = (f"its SoC {host.soc}, {host.capability_source}" if host.soc and host.capability_source == host.soc_source
                else host.capability_source)
        return (f"this image is built for {built}, and the host's GPU has compute capability {host.capability} "
                f"({read})", rebuild)
    return None


@dataclass(frozen=True)
class Start:
    """What the entrypoint found: the host it refused (message, fix), or the platform and
    channel it matched, with the strict doctor's report then."""

    refused: Optional[Tuple[str, str]]
    platform: Optional["Platform"] = None
    channel: Optional["Channel"] = None
    l4t: Optional["L4T"] = None
    host: Optional[HostFacts] = None


def start_check(environ: Mapping[str, str]) -> Start:
    """The entrypoint's host check: the host's L4T major (and capability) must be the image's,
    and its L4T release and SoC must be in the channel the image was built for."""
    from jetson_install.catalog import load_catalog
    from jetson_install.platform import L4TOverride, SocOverride, detect

    host = host_facts(Path("/"), environ)
    mismatch = host_mismatch(host, environ)
    if mismatch is not None:
        return Start(mismatch)
    assert host.l4t is not None
    soc = SocOverride(host.soc, host.soc_source) if host.soc and host.soc_source != DEVICE_TREE else None
    platform = detect(Path("/"), L4TOverride(str(host.l4t), host.l4t_source), soc_override=soc)
    match = load_catalog().match(platform)
    built_channel = environ.get("JETSON_INSTALL_IMAGE_CHANNEL", "")
    built_soc = environ.get("JETSON_INSTALL_IMAGE_SOC", "")
    if match.channel is None and platform.soc is None:
        return Start((f"this image is built for channel {built_channel}, and the host's SoC is unknown on "
                      f"L4T R{host.l4t} ({host.l4t_source}): {DEVICE_TREE} cannot be read in this container "
                      f"and neither {HOST_SOC_VARIABLE} nor {HOST_CAPABILITY_VARIABLE} is set",
                      f"name the host's SoC: run it with --env {HOST_SOC_VARIABLE}={built_soc or 'tegra264'} "
                      "(what the image is built for), or let the container read the device tree"))
    channel = match.channel
    if channel is None or channel.id != built_channel:
        return Start((f"this image is built for channel {built_channel}, and the host's L4T R{host.l4t} "
                      f"({host.l4t_source}){_on(platform.family, host)} is "
                      f"{'channel ' + channel.id if channel else 'in no channel'}",
                      "build the image for this host: run `jetson-install dockerfile` on it"))
    return Start(None, platform, channel, host.l4t, host)


def _on(family: Optional[str], host: HostFacts) -> str:
    return f" on {family} {host.soc} ({host.soc_source})" if family and host.soc else ""


def host_line(start: "Start") -> str:
    """What the entrypoint matched, and where it read each fact."""
    assert start.host is not None and start.channel is not None
    host = start.host
    return (f"host L4T R{host.l4t} ({host.l4t_source}){_on(start.platform.family if start.platform else None, host)} "
            f"is channel {start.channel.id}, the image's")
