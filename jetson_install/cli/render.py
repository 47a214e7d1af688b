"""Human-readable text for the structured results; nothing here decides anything.

What only some results need is imported by the function that renders them: `detect` renders a
platform and loads none of the plan's, the environment's or the fleet's helpers."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Sequence, Tuple

from jetson_install import __version__
from jetson_install.board.platform import Platform

if TYPE_CHECKING:
    from jetson_install.catalog.catalog import Catalog, Channel
    from jetson_install.cli.commands.outdated import Outdated
    from jetson_install.cli.commands.paths import Place
    from jetson_install.envs.lifecycle import Cleaned, EnvironmentView, Listed, RolledBack, Uninstalled
    from jetson_install.fleet.lock import LockResult
    from jetson_install.planning.rerun import Rerun
    from jetson_install.planning.plan import Plan
    from jetson_install.planning.plan_file import PlanFile
    from jetson_install.running.install import InstallResult
    from jetson_install.cli.commands.channels import SetReport
    from jetson_install.cli.commands.export import Exported

__all__ = ["platform_summary", "plan_text", "plan_warnings", "plan_shown", "install_hint", "install_lines", "addition_line",
           "lock_lines", "wheelhouse_lines", "dockerfile_written", "container_lines",
           "channels_text", "channels_markdown", "channels_json", "check_lines", "check_json", "check_list",
           "check_list_json", "size_text", "environments_json", "environments_lines", "rollback_lines",
           "uninstall_lines", "clean_lines", "export_lines", "export_notes", "saved_plan_lines", "paths_lines",
           "outdated_lines"]


def platform_summary(platform: Platform, typed: Rerun) -> str:
    """`detect`: the platform, where each fact was read, and what to run next (its warnings go
    to stderr, as every command's do: `main.detect` prints them there)."""
    name = platform.module or platform.model or "Jetson (module unknown)"
    soc = platform.soc or "SoC unknown"
    if platform.family and platform.compute_capability:
        soc += f" ({platform.family}, compute capability {platform.compute_capability})"
    lines: List[str] = [
        f"{name}: {soc}",
        f"  L4T      {platform.l4t or 'unknown'}   ({platform.sources.get('l4t', '-')})",
        f"  JetPack  {platform.jetpack or 'unknown'}",
        f"  CUDA     {platform.cuda or 'unknown'}   ({platform.sources.get('cuda', '-')})",
        f"  kind     {platform.kind or 'unknown'}",
        f"  Ubuntu   {platform.ubuntu or 'unknown'}   Python {platform.python or 'unknown'}",
    ]
    if platform.model and platform.module:
        lines.append(f"  model    {platform.model}")
    if platform.kernel:
        lines.append(f"  kernel   {platform.kernel}")
    lines.append(f"next: see what an install would do: {typed.replaced('detect', ('plan', 'obliteratus'))}")
    return "\n".join(lines)


def plan_text(plan: Plan) -> str:
    platform = plan.platform
    board = platform.module or platform.model or "Jetson"
    lines = [f"Plan: {plan.target.title} on {board}, L4T {platform.l4t or 'unknown'} / JetPack {platform.jetpack or 'unknown'}"]
    if plan.channel is not None:
        lines.append(f"  channel   {plan.channel.id} ({plan.channel.status}): {plan.channel.title}")
    if not plan.supported:
        lines.append(f"  {plan.reason}")
        if plan.remedy:
            lines.append(f"  to make it work: {plan.remedy}")
        if plan.channel is not None:
            lines += container_lines(plan.channel)
        return "\n".join(lines)
    settings = plan.settings
    lines += [
        f"  python    {plan.interpreter or plan.python_abi}",
        f"  venv      {plan.venv}",
        f"  vendor    {plan.vendor_location or 'none'}   ({plan.route.vendor_label(plan)})",
        *[f"  then      {url}   ({source}; recorded builds only)" for url, source in plan.vendor_mirrors()],
        f"  default   {settings.default_index.value or 'uv default index'}   ({settings.default_index.source})",
        f"  set       {_set_line(plan)}",
        f"  pins      {' '.join(plan.constraints)}",
        *[f"  cap       {cap}   ({why})" for cap, why in plan.caps],
        f"  source    {plan.requirement or 'none: the stack alone'}",
        *([f"  extras    {plan.extra or 'none'}   (from {plan.extra_from})"] if plan.extra_from else []),
        *[f"  with      {addition}" for addition in plan.additions],
        *[f"  check     {command}" for command in plan.check_commands],
    ]
    fallback = plan.route.fallback_location(plan)
    if fallback:
        lines.append(f"  fallback  {fallback}   (if the vendor source is down: --vendor-fallback)")
    if plan.vendor and plan.vendor.apt:
        from jetson_install.board import apt

        lines.append(f"  apt       {apt.install_command(plan.vendor.apt, assume_yes=True)}   (the vendor wheels need these)")
        elsewhere = apt.from_cuda_repository(plan.vendor.apt)
        if elsewhere:
            lines.append(f"            ({', '.join(elsewhere)}: from NVIDIA's CUDA repository, which its cuda-keyring"
                         " package adds first)")
        held = [library for library in plan.vendor.libraries
                if library.provider == "apt" and library.package in plan.vendor.apt]
        if held:
            said = ", ".join(f"{library.package} must provide {library.soname}" for library in held)
            lines.append(f"            ({said}: the libraries step and the doctor check that the loader finds it)")
    if plan.channel is not None:
        lines += container_lines(plan.channel)
    lines.append("steps:")
    for number, step in enumerate(plan.steps, 1):
        lines.append(f"  {number}. {step.id:12} {step.title}")
        lines.extend(f"       $ {_shell_line(command)}" for command in step.commands)
        lines.extend(f"       download {download.url} (sha256 {download.sha256 or 'measured as it is read'})"
                     for download in step.downloads)
        if step.equivalent:
            lines.append(f"       (the doctor, in jetson-install's own process; the same later: "
                         f"{_shell_line(step.equivalent)})")
    return "\n".join(lines)


def plan_warnings(plan: Plan) -> str:
    """The plan's warnings, for stderr (as every command's warnings go), each on its line."""
    return "".join(f"warning: {warning}\n" for warning in plan.warnings)


def container_lines(channel: Channel) -> List[str]:
    """The images known to match a channel, for the container lane (`jetson-install dockerfile`)."""
    if not channel.containers:
        return [f"  images    none known for {channel.id}: `jetson-install dockerfile` needs --base IMAGE"]
    return [f"  {'images' if number == 0 else '':9} {image.image}   (source: {image.source})"
            for number, image in enumerate(channel.containers)]


def _set_line(plan: Plan) -> str:
    vendor = plan.vendor
    assert vendor is not None and plan.chosen_set is not None
    policy = ", ".join(s.shown for s in vendor.sets)
    pre = "pre-releases count" if vendor.prereleases else "no pre-releases"
    how = plan.route.set_note(plan)
    return f"{plan.chosen_set.name} ({how}); policy: {policy}; {pre}"


def channels_text(catalog: Catalog) -> str:
    lines = []
    for channel in catalog.channels:
        low = f"R{channel.l4t_from[0]}.{channel.l4t_from[1]}"
        high = f"R{channel.l4t_below[0]}.{channel.l4t_below[1]}"
        families = f" [{', '.join(channel.families)}]" if channel.families else ""
        lines.append(f"{channel.id:15} {channel.status:12} L4T {low} to below {high}{families}  Python {channel.python}  CUDA {channel.cuda}")
        if channel.primary:
            lines.append(f"{'':15} {channel.primary.location}")
        lines += [f"{'':15} image {image.image}" for image in channel.containers]
    lines.append(f"{catalog.path}: valid, {len(catalog.channels)} channels "
                 f"({sum(1 for c in catalog.channels if c.installable)} installable)")
    return "\n".join(lines)


def channels_markdown(catalog: Catalog) -> str:
    """The support table in README.md, generated from wheels-index.toml."""
    rows = ["| channel | L4T | JetPack | Python | CUDA | status | vendor source | torch (preferred set) | bitsandbytes |",
            "|---|---|---|---|---|---|---|---|---|"]
    for channel in catalog.channels:
        families = f" ({', '.join(channel.families)})" if channel.families else ""
        l4t = f"R{channel.l4t_from[0]}.{channel.l4t_from[1]} to < R{channel.l4t_below[0]}.{channel.l4t_below[1]}{families}"
        wanted = channel.primary.preferred.specifiers if channel.installable and channel.primary else {}
        torch, bnb = wanted.get("torch", "-").lstrip("="), wanted.get("bitsandbytes", "-")
        vendor = channel.primary.location if channel.installable and channel.primary else "-"
        rows.append(f"| `{channel.id}` | {l4t} | {channel.jetpack} | {channel.python} | {channel.cuda} | "
                    f"{channel.status} | {vendor} | {torch} | {bnb.lstrip('=')} |")
    return "\n".join(rows)


def _shell_line(argv: Sequence[str]) -> str:
    return " ".join(shlex.quote(part) for part in argv)


def channels_json(catalog: Catalog) -> List[Dict[str, Any]]:
    """`channels --json`: each channel with its sources, pins, images and sets."""
    return [{"id": c.id, "title": c.title, "status": c.status, "reason": c.reason, "python": c.python,
             "cuda": c.cuda, "vendor_sources": [s.location for s in c.sources], "pins": dict(c.pins),
             "containers": [image.to_json() for image in c.containers],
             "preferred": c.primary.preferred.name if c.primary else None,
             "sets": [s.requirement_lines() for s in c.primary.sets] if c.primary else []}
            for c in catalog.channels]


def check_lines(reports: Sequence[SetReport]) -> List[str]:
    """`channels --check`: one line per source read, its findings under it."""
    lines = []
    for report in reports:
        mirror = f"   (mirror of {report.mirror_of})" if report.mirror_of else ""
        lines.append(f"{report.channel:15} {report.status:11} {report.index}{mirror}")
        lines.extend(f"{'':20} {line}" for line in report.lines)
    return lines


def check_json(reports: Sequence[SetReport]) -> List[Dict[str, Any]]:
    """`channels --check --json`: each source read, and what was found."""
    return [{"channel": r.channel, "index": r.index, "status": r.status, "ok": r.ok, "lines": list(r.lines),
             "mirror_of": r.mirror_of} for r in reports]


def plan_shown(plan: Plan, typed: Rerun) -> str:
    """`plan TARGET`: the plan, and for a supported one what to run next."""
    return plan_text(plan) + (f"\n{install_hint(plan, typed)}" if plan.supported else "")


def install_hint(plan: Plan, typed: Rerun) -> str:
    """What to run next after a plan, and where: a preview made for another machine says so."""
    here = os.uname().machine
    target = (plan.target.id,)
    command = typed.replaced("plan", target, drop=target, only_here=("--resolve",))
    if plan.route.any_aarch64 and here != "aarch64":
        return f"next: on an aarch64 machine (a hosted ARM runner, or the Jetson), install it: {command}"
    if not plan.route.any_aarch64 and plan.platform.arch != here:
        command = typed.replaced("plan", target, drop=target, only_here=("--resolve",), elsewhere=("--root",))
        return f"next: on the {plan.platform.arch} board itself, install it: {command}"
    return f"next: install it: {command}"


def install_lines(result: InstallResult, plan: Plan, log: Path) -> List[str]:
    """The end of an install, on stderr: warnings, each step's time, and how it went."""
    from jetson_install.envs.activation import activate_command
    from jetson_install.tools.progress import steps_summary

    lines = [f"warning: {warning}" for warning in result.warnings]
    if result.steps:
        lines.append(f"steps: {steps_summary(result.steps)}")
    if result.failed_step:
        return lines + [f"error: {result.message}", f"  fix: {result.fix}", f"  log: {log}"]
    verb = "is already up to date" if result.status == "unchanged" else "is ready"
    if result.status != "unchanged" and not plan.verify:
        # Nothing promised that was not proven: --no-verify ran only the checks that need no GPU.
        verb = "is installed, its GPU not checked (--no-verify)"
    lines += [f"{plan.route.what(plan)} {verb} in {result.venv}", f"  activate: {activate_command(result.venv)}"]
    if result.status != "unchanged" and not plan.verify:
        lines.append(f"  prove it: jetson-install doctor --venv {shlex.quote(result.venv)}")
    return lines + ([f"  evidence: {result.evidence}"] if result.evidence else []) + [f"  log: {log}"]


def addition_line(new: Sequence[str], link: Path, kept: Sequence[str], command: Rerun) -> str:
    """What `add` is about to do, and the command it runs for it."""
    return (f"add: {', '.join(new)} to {link}" + (f" (kept: {', '.join(kept)})" if kept else "")
            + f"; a new environment from the command that made it: {command}")


def lock_lines(result: LockResult) -> List[str]:
    lock = result.lock
    lines = [f"locked {len(lock.entries)} files for {lock.arch}/Python {lock.python} (channel {lock.channel}) in "
             f"{result.path}"]
    if result.wheel:
        lines.append(f"  {lock.target} wheel: {result.wheel} (commit {lock.source_commit or 'none'})")
    if lock.from_source:
        lines.append(f"  built from source on the board: {', '.join(lock.from_source)}")
    lines += [f"warning: {warning}" for warning in lock.warnings]
    return lines + [f"  install: {result.install_command}"]


def wheelhouse_lines(result: Dict[str, Any]) -> List[str]:
    from jetson_install.planning.fixes import runner_command

    where, target = result["directory"], result.get("target", "obliteratus")
    return [f"warning: {warning}" for warning in result.get("warnings", ())] + [
            f"{result['files']} files in {where} ({result['downloaded_bytes']} bytes downloaded)",
            f"  install offline: jetson-install {target} --wheelhouse {shlex.quote(where)}",
            # Not `python3 -m http.server`: a connection per request and no ranges make a fleet's
            # installs several times slower (the README's benchmarks); --serve has neither cost.
            f"  serve to a fleet: any static web server (nginx: docs/fleets.md) serves {shlex.quote(where)} as it is, "
            f"or push it to a registry (jetson-install wheelhouse {shlex.quote(where)} --push "
            f"oci://HOST/REPOSITORY:TAG); then on each runner, with its own copy of {result['lock']} (the hashes "
            "come from it, so copy it as you trust it): "
            + runner_command(target, result["lock"], "http://HOST/")] + (
        [f"  the tool itself ({result['tool']['files']} files), offline on the board: {result['tool']['install']}"]
        if result.get("tool") else [])


def pushed_lines(result: Dict[str, Any]) -> List[str]:
    """`wheelhouse --push`: where the wheelhouse now is, by digest, and what each runner runs."""
    from jetson_install.planning.fixes import runner_command

    return [f"pushed {result['files']} files of {result['directory']} and its lock to {result['pushed']} "
            f"({result['uploaded']} uploaded, {result['uploaded_bytes']} bytes; the registry had the rest)",
            f"  on each runner (the digest pins the lock, the lock each file): {result['install']}",
            f"  or with the runner's own copy of the lock: {runner_command(result['target'], 'FILE', result['tag'])}"]


def dockerfile_written(output: str, base: str, context: Path) -> str:
    """`dockerfile --output`: what was written, and how to build it."""
    return (f"wrote {output} (FROM {base}); put jetson_install-{__version__}-py3-none-any.whl beside it "
            f"(pip wheel --no-deps -w {context} <jetson-install checkout>), then build it there: "
            f"cd {context} && docker build -t obliteratus-jetson .")


def check_list_json(checks: Sequence[Tuple[str, str, bool]]) -> List[Dict[str, Any]]:
    return [{"id": check_id, "title": title, "required": required} for check_id, title, required in checks]


def check_list(checks: Sequence[Tuple[str, str, bool]]) -> str:
    """`doctor --list-checks`: each check's id, whether it is required, and its title."""
    width = max(len(check_id) for check_id, _, _ in checks) + 2
    return "\n".join(f"{check_id:{width}}{'required' if required else 'optional':10}{title}"
                     for check_id, title, required in checks)


def size_text(size: int) -> str:
    """Bytes as du -h would say them (1024-based), to one decimal."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def _environment_line(label: str, view: EnvironmentView) -> List[str]:
    doctor = f"doctor {view.doctor} ({view.doctor_at})" if view.doctor else "no doctor evidence"
    lines = [f"  {label:9} {Path(view.path).name}   made {view.made or 'unknown'}   {size_text(view.size)}",
             f"  {'':9} channel {view.channel or 'unknown'}   torch {view.torch or 'none'}   {doctor}"]
    if view.changed:
        lines.append(f"  {'':9} changed since its doctor ran: {'; '.join(view.changed)}")
    return lines


def environments_json(listed: Sequence[Listed]) -> Dict[str, Any]:
    return {"schema_version": 1, "environments": [entry.to_json() for entry in listed]}


def environments_lines(listed: Sequence[Listed]) -> List[str]:
    """`list`: each DIR, the environment in use and the one kept for rollback, with what they hold."""
    if not listed:
        return ["no environments made by jetson-install for this user (install one: jetson-install obliteratus)"]
    lines: List[str] = []
    for entry in listed:
        lines.append(entry.venv + ("" if entry.state == "ok" else f"   ({entry.state})"))
        if entry.current is not None:
            lines += _environment_line("current", entry.current)
            if entry.current.requirement:
                lines.append(f"  {'':9} {entry.current.requirement}")
            if entry.current.additions:
                lines.append(f"  {'':9} added: {', '.join(entry.current.additions)}")
        if entry.previous is not None:
            lines += _environment_line("previous", entry.previous)
            if entry.previous.passed:
                lines.append(f"  {'':9} roll back to it: jetson-install rollback --venv {entry.venv}")
            else:
                # Its own evidence does not vouch for it now: a rollback is not offered blind.
                python = shlex.quote(f"{entry.previous.path}/bin/python")
                lines.append(f"  {'':9} check it before rolling back to it: jetson-install doctor --python {python}")
        if entry.other_size:
            lines.append(f"  {'other':9} {size_text(entry.other_size)} left by interrupted runs "
                         "(remove: jetson-install clean)")
        if entry.failed_evidence:
            lines.append(f"  {'failed':9} {len(entry.failed_evidence)} failed verify(s), their doctor evidence kept: "
                         f"{entry.failed_evidence[0]} (the newest)")
        if entry.state == "broken":
            lines.append(f"  fix: jetson-install rollback --venv {entry.venv}" if entry.previous else
                         f"  fix: install it again: jetson-install {entry.target} --venv {entry.venv}" if entry.target
                         else f"  fix: install it again with the command that made it: jetson-install TARGET --venv "
                              f"{entry.venv} (the targets: jetson-install --help)")
        elif entry.state == "partly removed":
            lines.append(f"  fix: finish removing it: jetson-install uninstall --venv {entry.venv}")
    return lines


def rollback_lines(result: RolledBack) -> List[str]:
    return [f"{result.venv} -> {Path(result.now).name} (rolled back; {Path(result.kept).name} is kept)",
            f"  undo: jetson-install rollback --venv {result.venv}"]


def uninstall_lines(result: Uninstalled) -> List[str]:
    names = ", ".join(Path(path).name for path in result.removed) or "no environment"
    lines = [f"removed {result.venv} ({names}; {size_text(result.freed)} freed)"]
    if result.left:
        lines.append(f"  left in {Path(result.venv).name}.d, not made by jetson-install: "
                     + ", ".join(Path(path).name for path in result.left))
    return lines


def clean_lines(result: Cleaned) -> List[str]:
    verb = "would remove" if result.dry_run else "removed"
    lines = [f"{verb} {size_text(size):>10}  {what}: {path}" for what, path, size in result.items]
    total = sum(size for _, _, size in result.items)
    count = len(result.items)
    lines.append(f"{verb} {size_text(total)} in {count} item{'' if count == 1 else 's'}" if result.items else
                 "nothing to clean: no logs, build cache or leftovers of jetson-install's")
    lines += [f"left      {path} (not made by jetson-install)" for path in result.left]
    if result.kept_evidence:
        lines.append(f"kept      {len(result.kept_evidence)} failed-verify evidence file(s), the newest "
                     f"{result.kept_evidence[0]} (remove them too: jetson-install clean --failed-evidence)")
    lines += [f"skipped   {venv} (an install is in progress there; run clean when it ends)" for venv in result.busy]
    return lines


def export_lines(exported: Exported) -> List[str]:
    """What `export --uv` wrote into the project, a setting a line."""
    from jetson_install.catalog.uv_settings import settings_lines

    settings, edit, channel = exported.settings, exported.edit, exported.settings.channel
    assert edit is not None
    if not edit.changed:
        head = f"{exported.path}: holds {channel.id}'s uv settings already; nothing changed"
    elif edit.replaced and edit.replaced != channel.id:
        head = f"{exported.path}: {channel.id}'s uv settings written in place of {edit.replaced}'s: {channel.title}"
    else:
        head = f"{exported.path}: {channel.id}'s uv settings written: {channel.title}"
    lines = [head] + [f"  {line}" for line in settings_lines(settings)]
    if edit.dev_kept:
        lines.append('  [tool.uv] default-groups: "dev" too, which uv synced by default while default-groups was unset')
    lines.append("next: uv lock, then on the board: uv sync && jetson-install doctor --venv .venv")
    return lines


def export_notes(exported: Exported) -> List[str]:
    """What the settings cannot do, said where they are written or shown."""
    from jetson_install.catalog.identity import VENDOR_PACKAGES

    settings, channel = exported.settings, exported.settings.channel
    notes = [f"the marker holds the settings to Jetsons, but PEP 508 markers tell neither the L4T release nor Orin "
             f"from Thor on R39: every Jetson that syncs this project takes {channel.id}'s builds (the dependency "
             f"group {settings.group} names the channel), and `jetson-install doctor --venv .venv` fails on a board "
             "of another channel; one uv.lock holds one Jetson channel"]
    missing = [name for name in VENDOR_PACKAGES if channel.primary and name not in channel.primary.preferred.specifiers]
    if missing:
        notes.append(f"{channel.id} has no {' or '.join(missing)} build: where the project asks for "
                     f"{'them' if len(missing) > 1 else 'it'}, uv takes {'them' if len(missing) > 1 else 'it'} from "
                     "the default index")
    if exported.edit is not None and exported.edit.default_groups_made and not exported.edit.dev_kept:
        notes.append("[tool.uv] default-groups now decides which groups `uv sync` installs: name a dev group there "
                     "if you add one")
    return notes


def saved_plan_lines(saved: PlanFile, out: Path) -> List[str]:
    """After `plan TARGET --out FILE`: where the plan is, what it would do, and how to apply it."""
    changes = (f"it would change the environment: {saved.would_change_reason}" if saved.would_change
               else f"it would change nothing: {saved.would_change_reason}")
    apply = shlex.join(["jetson-install", saved.plan_command[saved.plan_command.index("plan") + 1], "--plan", str(out)])
    return [f"plan saved to {out} ({changes})", f"next: apply exactly this plan: {apply}"]


def paths_lines(places: Sequence[Place]) -> List[str]:
    """`paths`: each folder or file, where it is, and what gave it."""
    width = max(len(place.name) for place in places)
    lines = []
    for place in places:
        where = str(place.path) if place.path is not None else "-"
        if place.detail:
            where += f", {place.detail}" if place.path is not None else f" ({place.detail})"
        if place.path is not None and not place.exists:
            where += " (not there yet)"
        given = {"default": "default", "configuration": place.source}.get(place.kind, f"${place.source}")
        lines.append(f"{place.name:<{width}}  {where}  [{given}]")
    return lines


def outdated_lines(found: Outdated) -> List[str]:
    """`outdated`: what is newer for each environment, and the command that upgrades it."""
    lines = []
    for news in found.environments:
        made = ", ".join(part for part in (news.target, news.channel) if part)
        head = f"{news.venv}" + (f" ({made})" if made else "")
        if not news.found:
            lines.append(f"{head}: up to date")
            continue
        lines.append(f"{head}:")
        lines += [f"  {item.what} {item.installed} -> {item.newer} ({item.where}); upgrade: {item.upgrade}"
                  for item in news.newer]
        lines += [f"  {item.what}: not known: {item.why}" for item in news.unread]
    if not found.environments:
        lines.append("no environment made by jetson-install (see: jetson-install list)")
    newer, unread = found.tool_newer, found.tool_unread
    if newer is not None:
        lines.append(f"jetson-install {newer.installed} -> {newer.newer} ({newer.where}); upgrade: {newer.upgrade}")
    elif unread is not None:
        lines.append(f"jetson-install {__version__}: not known: {unread.why}")
    elif not found.named:
        lines.append(f"jetson-install {__version__}: up to date")
    return lines
