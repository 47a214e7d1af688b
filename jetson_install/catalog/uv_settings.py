"""A channel's protected stack as a uv project's settings (what the project's own settings must
not contradict is catalog/uv_project.py's; their edit into its pyproject.toml, catalog/uv_export.py's).

`jetson-install export --uv` makes plain `uv lock` and `uv sync` install the channel's vendor
builds on a Jetson, and leave a workstation that shares the project's uv.lock with its own
torch. Every setting is held to Jetsons by one PEP 508 marker (`BOARD_MARKER`). What uv reads
(https://docs.astral.sh/uv/reference/settings/ and https://docs.astral.sh/uv/concepts/indexes/,
for the uv this tool ships, 0.13):

- `[[tool.uv.index]]` with `explicit = true`: the vendor index, used only for the packages a
  `[tool.uv.sources]` entry sends to it (none for a channel whose builds are on uv's default
  index, which is never named);
- `[tool.uv.sources]`: torch, torchvision, torchaudio and bitsandbytes from that index, on
  Jetsons only (`marker`); uv applies sources to `constraint-dependencies` too (it lowers them
  like requirements: astral-sh/uv crates/uv/src/commands/project/lock.rs, "lower the overrides
  and constraints"), so a torchvision a dependency brings comes from the vendor index as well;
- `[tool.uv] constraint-dependencies`: constraints/<channel>.txt's lines (the preferred set's
  pins, NumPy's bound, the caps), on Jetsons only;
- `[dependency-groups]` `jetson-<channel>`: the stack itself (and the runtime wheels its builds
  need but do not declare), on Jetsons only, which `[tool.uv] default-groups` names so that a
  plain `uv sync` installs it (https://docs.astral.sh/uv/concepts/projects/dependencies/#default-groups).

A source scoped to a group or an extra (`group = ...`) applies only to requirements of that
group (https://github.com/astral-sh/uv/pull/9160); with uv 0.13.9 the project's own `torch`
then resolved to that group's vendor build on the workstation too, marker or not
(tests/test_export_uv_sync.py holds this). So one
uv.lock holds one Jetson channel: markers tell a Jetson from any other machine, but neither the
L4T release nor Orin from Thor on R39, and the exported group names the channel it is for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Sequence, Tuple

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename

from jetson_install.base.errors import Unsupported
from jetson_install.base.sourced import Sourced
from jetson_install.base.toml_text import Marks, string
from jetson_install.catalog.catalog import Catalog, Channel
from jetson_install.catalog.constraints import channel_constraint_lines
from jetson_install.catalog.identity import VENDOR_PACKAGES

__all__ = ["BOARD_MARKER", "BEGIN", "UvSettings", "uv_settings", "vendor", "settings_lines"]

#: Where the settings hold: Linux on aarch64 with an L4T kernel, whose release ends in "-tegra"
#: on every board captured here (jetson_install/board/samples/*/proc/sys/kernel/osrelease, and
#: tests/resources/boards/: 5.10.120-tegra, 5.15.148-tegra, 6.8.12-tegra, 6.8.12-1021-tegra);
#: projects tell Jetsons apart the same way (pollen-robotics/microduck_rl pull request 39).
BOARD_MARKER = "sys_platform == 'linux' and platform_machine == 'aarch64' and 'tegra' in platform_release"

BEGIN = "# >>> jetson-install export --uv"
_END = "# <<< jetson-install export --uv <<<"


def _marks(channel_id: str) -> Marks:
    return Marks(f"{BEGIN}: {channel_id} (each run rewrites these lines) >>>", BEGIN, _END,
                 f"{BEGIN}: {channel_id} (each run rewrites this key) >>>", "(each run rewrites this key) >>>")


@dataclass(frozen=True)
class UvSettings:
    """One channel's settings for a uv project, each held to Jetsons by BOARD_MARKER."""

    channel: Channel
    group: str  # the dependency group (and explicit index) name: "jetson-jp6-cu126"
    index: Optional[Sourced[str]]  # the explicit vendor index and where its URL came from; None: uv's default index
    sources: Tuple[Tuple[str, str], ...]  # (package, where it comes from on a Jetson, as an inline table)
    requirements: Tuple[str, ...]  # the group: the vendor set and its companions
    constraints: Tuple[str, ...]  # constraint-dependencies

    @property
    def marks(self) -> Marks:
        return _marks(self.channel.id)

    @property
    def pins(self) -> Dict[str, str]:
        """The exact versions the constraints pin (a package given by a range is left out)."""
        return {name: version for name, version in (_pinned(line) for line in self.constraints) if version}


def _pinned(line: str) -> Tuple[str, Optional[str]]:
    requirement = Requirement(line)
    exact = [s.version for s in requirement.specifier if s.operator == "=="]
    return canonicalize_name(requirement.name), exact[0] if len(exact) == 1 else None


def _on_jetsons(requirement: str) -> str:
    return f"{requirement} ; {BOARD_MARKER}"


def uv_settings(catalog: Catalog, channel: Channel, vendor_index: Optional[Sourced[str]] = None) -> UvSettings:
    """The settings for `channel`'s preferred set; `vendor_index`, a mirror of its builds
    (--vendor-index, or the configuration's vendor_index), replaces its own source."""
    source = channel.primary
    if not channel.installable or source is None:
        raise Unsupported(f"channel {channel.id} is {channel.status}: {channel.reason}", fix=channel.remedy or None)
    group = str(canonicalize_name(f"jetson-{channel.id}"))
    wanted = [name for name in VENDOR_PACKAGES if name in source.preferred.specifiers]
    where: Dict[str, str] = {}
    index: Optional[Sourced[str]] = None
    if vendor_index is not None or source.index is not None:
        index = vendor_index or Sourced(str(source.index), "wheels-index.toml")
        where = {name: f"{{ index = {string(group)}, marker = {string(BOARD_MARKER)} }}" for name in wanted}
    elif source.wheels:
        # A source of direct wheel URLs (NVIDIA's own JetPack 6.0 file): each package from its URL.
        for url in source.wheels:
            name = str(parse_wheel_filename(url.rsplit("/", 1)[-1])[0])
            where[name] = f"{{ url = {string(url)}, marker = {string(BOARD_MARKER)} }}"
    requirements = tuple(_on_jetsons(line) for line in source.preferred.requirement_lines() + list(source.companions))
    constraints = tuple(_on_jetsons(line) for line in channel_constraint_lines(catalog, channel))
    return UvSettings(channel, group, index, tuple((name, where[name]) for name in VENDOR_PACKAGES if name in where),
                      requirements, constraints)


def vendor(settings: UvSettings) -> str:
    if settings.index is not None:
        return settings.index.value
    urls = dict(settings.sources)
    return "its wheel URL" if urls else "uv's default index"


def settings_lines(settings: UvSettings) -> Sequence[str]:
    """What the settings are, a line each, for the command's output."""
    lines = []
    if settings.index is not None:
        lines.append(f"[[tool.uv.index]] {settings.group}: {settings.index.value} (explicit: only for the packages "
                     "its sources name)")
    stack = {canonicalize_name(Requirement(line).name) for line in settings.requirements}
    names = ", ".join(name for name in VENDOR_PACKAGES if name in stack)
    if settings.sources:
        lines.append(f"[tool.uv.sources] {', '.join(name for name, _ in settings.sources)}: from "
                     f"{vendor(settings)}, on Jetsons")
    else:
        lines.append(f"[tool.uv.sources] none: on Jetsons {names} come from uv's default index at the pinned "
                     "versions; uv.lock records each file's sha256, and uv sync installs only those files")
    pins = ", ".join(line.split(" ;")[0] for line in settings.constraints)
    lines.append(f"[tool.uv] constraint-dependencies: {pins}, on Jetsons")
    lines.append(f"[dependency-groups] {settings.group}: the stack a plain `uv sync` installs on Jetsons "
                 "([tool.uv] default-groups names it)")
    return lines
