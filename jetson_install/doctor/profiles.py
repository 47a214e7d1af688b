"""What the doctor expects of an environment: its profile, with everything that differs.

The Jetson profile (the base here) expects the vendor CUDA builds and a GPU. The preflight
profile (`--preflight` environments, made on any aarch64 machine) expects CPU builds of
torch and bitsandbytes' CPU library, runs nothing on a GPU, and its pass is never Jetson
evidence. The checks ask the profile; nothing else tells the two apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional, Protocol, Tuple

from jetson_install.doctor.results import FAIL, OK, Verdict
from jetson_install.base.versions import satisfies

if TYPE_CHECKING:
    from jetson_install.catalog.catalog import Channel, VendorSource
    from jetson_install.board.platform import Platform


class Context(Protocol):
    """What a profile reads of the doctor's context (doctor/context.py's Context)."""

    @property
    def platform(self) -> Optional["Platform"]: ...

    @property
    def channel(self) -> Optional["Channel"]: ...

    @property
    def source(self) -> Optional["VendorSource"]: ...

    @property
    def reinstall(self) -> str: ...

    def recorded_build(self, name: str) -> Optional[Dict[str, Any]]: ...

    def bnb_install_fix(self) -> str: ...

__all__ = ["Profile", "PreflightProfile", "JETSON", "profile_from_record"]


@dataclass(frozen=True)
class Profile:
    """The Jetson profile: the vendor CUDA builds on the board."""

    name = "jetson"
    #: What a passing report's status says.
    passed_status = "passed"

    def title(self, check_id: str, default: str) -> str:
        return default

    def platform_fix(self) -> str:
        return "run doctor on the Jetson itself; detection reads /etc/nv_tegra_release and the device tree"

    def reinstall_options(self, ctx: Context) -> str:
        """Options that remake an environment of this profile."""
        return ""

    def strict_refusal(self) -> Optional[Tuple[str, str]]:
        """(why, fix) when the strict gate cannot judge this profile."""
        return None

    def gpu_unchecked(self) -> Optional[str]:
        """Why the GPU checks do not apply, when they do not."""
        return None

    def bitsandbytes_moot(self, ctx: Context) -> Optional[str]:
        """Why no bitsandbytes is expected, when none is."""
        source = ctx.source
        if (ctx.channel is not None and source is not None and "bitsandbytes" not in source.preferred.specifiers
                and ctx.recorded_build("bitsandbytes") is None):
            return f"no Jetson bitsandbytes build for channel {ctx.channel.id}: OBLITERATUS is installed without its " \
                   "quantization extra"
        return None

    def torch_build(self, ctx: Context, raw: str, cuda: Optional[str]) -> Optional[Verdict]:
        """The profile's own verdict on torch's build, or None for the vendor build's checks."""
        return None

    def bitsandbytes_library(self, ctx: Context, library: Mapping[str, Any],
                             version: Optional[str]) -> Optional[Verdict]:
        """The profile's own verdict on the library bitsandbytes loaded, or None for CUDA's."""
        return None

    def obliteratus_device(self, device: str, install: str) -> Optional[Verdict]:
        """The profile's own verdict on the device OBLITERATUS picks, or None for cuda's."""
        return None

    def reinstall_fix(self, ctx: Context) -> Optional[str]:
        """The fix for a wrong torch or bitsandbytes when only the install itself can give the
        right one, or None for the vendor builds' own commands."""
        return None

    def passed_line(self, tally: str) -> Optional[str]:
        return None


JETSON = Profile()

_TITLES = {
    "platform": "platform read (preflight: any aarch64 machine)",
    "torch-build": "torch is a CPU build (preflight)",
    "bnb-library": "bitsandbytes loaded its CPU library (preflight)",
    "obliteratus": "OBLITERATUS uses cpu (preflight)",
}


@dataclass(frozen=True)
class PreflightProfile(Profile):
    """CPU builds of the channel's torch family, with its bitsandbytes range (None: the
    channel has no bitsandbytes)."""

    bitsandbytes: Optional[str] = None
    asked: bool = False  # by `doctor --preflight` on an environment not made with it

    name = "preflight"
    passed_status = "preflight-passed"

    @classmethod
    def for_channel(cls, channel: Optional["Channel"]) -> "PreflightProfile":
        """`doctor --preflight` on an environment not made with it: the channel's policy."""
        primary = channel.primary if channel is not None else None
        return cls(primary.preferred.specifiers.get("bitsandbytes") if primary is not None else None, asked=True)

    def title(self, check_id: str, default: str) -> str:
        # Its titles say so, in the report and in the evidence, so nothing reads a CPU pass as a GPU one.
        return _TITLES.get(check_id, default)

    def platform_fix(self) -> str:
        # A preflight runs off the Jetson by design: it needs the release it stands in for.
        return "name the Jetson release the preflight is for: jetson-install doctor --preflight --l4t 36.4.3"

    def reinstall_options(self, ctx: Context) -> str:
        # A preflight runs off the Jetson: the release it stands in for goes with it.
        release = ctx.platform.l4t if ctx.platform is not None else None
        return " --preflight" + (f" --l4t {release}" if release else "")

    def strict_refusal(self) -> Optional[Tuple[str, str]]:
        # The gate is Jetson GPU evidence; a preflight's CPU torch can never give it.
        if self.asked:
            return ("is checked as a preflight (--preflight was given)",
                    "drop --preflight to check it as a Jetson environment (or drop --strict)")
        return ("is checked as a preflight (CPU torch, made with --preflight)",
                "make the Jetson environment on the Jetson: jetson-install obliteratus --venv DIR; "
                "or check the preflight without --strict")

    def gpu_unchecked(self) -> Optional[str]:
        return "preflight: a CPU build of torch; the GPU is checked only by the Jetson profile"

    def bitsandbytes_moot(self, ctx: Context) -> Optional[str]:
        # The preflight takes the channel's bitsandbytes range from the default index, apart
        # from its CPU torch set.
        if ctx.channel is not None and self.bitsandbytes is None:
            return (f"channel {ctx.channel.id} has no bitsandbytes: the preflight installs OBLITERATUS without its "
                    "quantization extra, as on the Jetson")
        return None

    def torch_build(self, ctx: Context, raw: str, cuda: Optional[str]) -> Optional[Verdict]:
        """The preflight installs CPU builds: a CUDA build there means its pins went wrong."""
        if cuda:
            return FAIL, f"torch {raw} is a CUDA {cuda} build; the preflight expects a CPU build", ctx.reinstall
        pin = ctx.source.pins.get("torch") if ctx.source is not None else None
        if pin and not satisfies(raw, f"=={pin}"):
            return FAIL, f"torch {raw} is not the preflight's pin ({pin})", ctx.reinstall
        return OK, f"torch {raw}, a CPU build, as the preflight expects" + (f" (pin {pin})" if pin else ""), None

    def bitsandbytes_library(self, ctx: Context, library: Mapping[str, Any],
                             version: Optional[str]) -> Optional[Verdict]:
        """With a CPU torch, a good bitsandbytes loads its CPU library (BNBNativeLibrary)."""
        wanted = self.bitsandbytes
        if wanted and version and not satisfies(version, wanted):
            return (FAIL, f"bitsandbytes {version} is outside the channel's range {wanted}",
                    f"{ctx.reinstall} (the constraints keep bitsandbytes{wanted})")
        if library.get("class") == "BNBNativeLibrary" and library.get("file"):
            return OK, f"bitsandbytes {version} loaded its CPU library {library['file']}, as the preflight expects", None
        if library.get("class") == "ErrorHandlerMockBNBNativeLibrary":
            reason = (library.get("error") or "no reason recorded").strip().splitlines()
            return FAIL, f"bitsandbytes {version} failed to load its CPU library: {reason[0] if reason else ''}", \
                ctx.bnb_install_fix()
        return (FAIL, f"bitsandbytes {version} loaded {library.get('file') or library.get('class')}; the preflight "
                      "expects its CPU library", ctx.bnb_install_fix())

    def obliteratus_device(self, device: str, install: str) -> Optional[Verdict]:
        if device != "cpu":
            return (FAIL, f"obliteratus.device.get_device('auto') answers {device!r}; with the preflight's CPU torch "
                          "it must answer 'cpu'", install)
        return OK, "OBLITERATUS imports; get_device('auto') answers 'cpu', as the preflight expects", None

    def reinstall_fix(self, ctx: Context) -> Optional[str]:
        return ctx.reinstall  # CPU builds, and the channel's range: never the channel's CUDA ones

    def passed_line(self, tally: str) -> Optional[str]:
        return (f"Preflight passed ({tally}): the environment installs and imports on aarch64 with CPU torch;"
                " this is not evidence that the Jetson GPU works.")


def profile_from_record(recorded: Mapping[str, Any], channel: Optional["Channel"], forced: bool) -> Profile:
    """The profile an environment was made with (its plan.json), else the preflight's when
    asked for (`doctor --preflight`), else the Jetson's."""
    preflight = recorded.get("preflight")
    if isinstance(preflight, dict):
        wanted = preflight.get("bitsandbytes")
        return PreflightProfile(wanted if isinstance(wanted, str) else None)
    return PreflightProfile.for_channel(channel) if forced else JETSON
