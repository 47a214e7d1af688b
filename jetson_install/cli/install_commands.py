"""A target's install (`jetson-install TARGET`) and its plan (`plan TARGET`), `add` and
`plan add`, and a saved plan's run (`--plan FILE`): the commands cli/main.py registers on its
groups. As there, what a command uses is imported when it runs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple

import click

from jetson_install.base.errors import EXIT_CHANGED, EXIT_INTERRUPTED, EXIT_UNSUPPORTED
from jetson_install.cli import options
from jetson_install.cli.options import install_options
from jetson_install.cli.output import exit_if, print_json

if TYPE_CHECKING:
    from jetson_install.cli.commands.add import Addition
    from jetson_install.planning.rerun import Rerun
    from jetson_install.planning.plan import Plan
    from jetson_install.planning.plan_file import PlanFile

__all__ = ["install_command", "plan_command", "add", "plan_add"]


def install_command(target_id: str, summary: str) -> click.Command:
    """`jetson-install TARGET`: install the target on the protected stack, then prove it works."""
    return click.command(target_id, help=summary)(
        options.INSTALL(lambda **given: _install(target_id, given, options.typed())))


def plan_command(target_id: str, summary: str) -> click.Command:
    """`jetson-install plan TARGET`."""
    return click.command(target_id, help=f"The ordered steps `jetson-install {target_id}` would take (offline "
                                         "unless --resolve).")(options.PLAN(lambda **given: _plan(target_id, given)))


def _plan(target_id: str, given: Dict[str, Any]) -> None:
    from jetson_install.cli.commands.plan import make_install_plan, resolve_plan
    from jetson_install.cli.render import plan_shown, plan_warnings

    the_plan = make_install_plan(install_options(target_id, given))
    if given["out"]:
        # Only here: a saved plan is made whole as the install makes it (its checks, the no-op
        # decision), which a plain `plan` never loads.
        from jetson_install.cli.commands.apply import saved_command

        _save(the_plan, saved_command(options.typed(), Path.cwd()), given)
        return
    if given["resolve"]:
        the_plan = resolve_plan(the_plan, options.typed())
    if given["as_json"]:
        print_json(the_plan.to_json())
    else:
        click.echo(plan_shown(the_plan, options.typed()))
        click.echo(plan_warnings(the_plan), err=True, nl=False)
    exit_if(0 if the_plan.supported else EXIT_UNSUPPORTED)


def _save(the_plan: Plan, command: Tuple[str, ...], given: Dict[str, Any]) -> None:
    """`plan ... --out FILE`: the whole plan, saved for `--plan FILE`, and shown."""
    from jetson_install.cli.commands.apply import save_plan
    from jetson_install.cli.render import plan_text, plan_warnings, saved_plan_lines

    out = Path(given["out"])
    the_plan, saved, warnings = save_plan(the_plan, options.typed(), command, out, given["resolve"])
    click.echo("".join(f"warning: {warning}\n" for warning in warnings), err=True, nl=False)
    if given["as_json"]:
        print_json({**the_plan.to_json(), "would_change": saved.would_change,
                     "would_change_reason": saved.would_change_reason, "plan_file": str(out)})
    else:
        click.echo(plan_text(the_plan))
        click.echo(plan_warnings(the_plan), err=True, nl=False)
    click.echo("\n".join(saved_plan_lines(saved, out)), err=True)


@click.command("add")
@options.PLAN_ADD
def plan_add(requirements: Tuple[str, ...], venv: Optional[str], check_commands: Tuple[str, ...], as_json: bool,
             resolve: bool, out: Optional[str]) -> None:
    """The plan `jetson-install add` would run (offline unless --resolve or --out)."""
    from jetson_install.cli.commands.add import addition
    from jetson_install.cli.commands.plan import make_install_plan, resolve_plan
    from jetson_install.cli.render import addition_line, plan_text, plan_warnings

    flags = tuple(word for command in check_commands for word in ("--check-command", command))
    made = addition(venv, requirements, flags, options.typed())
    click.echo(addition_line(made.new, made.link, made.kept, made.command), err=True)
    parsed = options.parsed(made.target, made.command.argv[1:])
    the_plan = make_install_plan(install_options(made.target, parsed.params, parsed))
    if out:
        _save(the_plan, made.command.argv, {"out": out, "resolve": resolve, "as_json": as_json})
        return
    if resolve:
        the_plan = resolve_plan(the_plan, made.command)
    if as_json:
        print_json({**the_plan.to_json(), "add": made.to_json()})
    else:
        click.echo(plan_text(the_plan))
        click.echo(plan_warnings(the_plan), err=True, nl=False)
    exit_if(0 if the_plan.supported else EXIT_UNSUPPORTED)


def _install(target_id: str, given: Dict[str, Any], rerun: Rerun, added: Optional[Addition] = None,
             context: Optional[click.Context] = None, saved: Optional[Tuple[PlanFile, Path]] = None) -> None:
    """`rerun`: the command that runs, as typed (or as `add` or a saved plan made it); `added`:
    what `add` asked for (in the JSON beside the install's own); `context`: where `given` was
    parsed; `saved`: the plan file it runs exactly, and where it was read."""
    from jetson_install.cli.commands.install import install, install_plan, preview
    from jetson_install.cli.render import install_lines, plan_text, plan_warnings
    from jetson_install.tools.progress import display_for

    if given["plan_file"] and saved is None:
        _apply(target_id, given)
        return
    extra = {"add": added.to_json()} if added is not None else {}

    def make() -> Plan:
        return install_plan(install_options(target_id, given, context), given["lock_file"], given["wheelhouse"],
                            rerun)

    if saved is not None:
        from jetson_install.cli.commands.apply import applied_plan

        the_plan = applied_plan(saved[0], saved[1], make)
    else:
        the_plan = make()
    if given["dry_run"] or not the_plan.supported:
        decide = given["as_json"] or given["detailed_exitcode"]
        the_plan, data, warnings = preview(the_plan, given["dry_run"], decide, rerun, given["upgrade"])
        click.echo("".join(f"warning: {warning}\n" for warning in warnings), err=True, nl=False)
        if given["as_json"]:
            print_json({**data, **extra})
        else:
            click.echo(plan_text(the_plan))
            click.echo(plan_warnings(the_plan), err=True, nl=False)
        if not the_plan.supported:  # the plan says why on stdout; a script reads stderr for the refusal
            reason = the_plan.reason[len("unsupported: "):] if the_plan.reason.startswith("unsupported: ") else the_plan.reason
            click.echo(f"error: {the_plan.target.title} is not supported here: {reason}", err=True)
            if the_plan.remedy:
                click.echo(f"  fix: {the_plan.remedy}", err=True)
        exit_if(0 if the_plan.supported else EXIT_UNSUPPORTED)
        exit_if(EXIT_CHANGED if given["detailed_exitcode"] and data.get("would_change") else 0)
        return
    if not given["yes"] and sys.stdin.isatty() and not given["as_json"]:
        click.echo(plan_text(the_plan), err=True)
        click.echo(plan_warnings(the_plan), err=True, nl=False)
        if not click.confirm("Proceed?", default=True, err=True):
            sys.exit(EXIT_INTERRUPTED)
    done = install(the_plan, display_for(sys.stderr), rerun, given["upgrade"])
    result = added.result(done.result) if added is not None else done.result
    if given["as_json"]:
        print_json({**result.to_json(the_plan), "log": str(done.log), **extra})
    click.echo("\n".join(install_lines(result, the_plan, done.log)), err=True)
    exit_if(result.exit_code)
    exit_if(EXIT_CHANGED if given["detailed_exitcode"] and result.status == "installed" else 0)


def _apply(command: str, given: Dict[str, Any]) -> None:
    """`TARGET --plan FILE`, `add --plan FILE`: the saved plan's install command, run exactly as
    it was planned; only how it is shown and confirmed comes from this command line."""
    from jetson_install.cli.commands.apply import read_saved
    from jetson_install.planning.rerun import Rerun

    path = Path(given["plan_file"])
    saved = read_saved(path, command, options.given_on_command_line(click.get_current_context(), options.WITH_PLAN))
    parsed = options.parsed(saved.command[0], saved.command[1:])
    shown = {name: given[name] for name in options.WITH_PLAN if name != "plan_file"}
    _install(saved.command[0], {**parsed.params, **shown}, Rerun(saved.command), None, parsed, (saved, path))


@click.command()
@options.ADD
def add(requirements: Tuple[str, ...], venv: Optional[str], dry_run: bool, yes: bool, as_json: bool,
        check_commands: Tuple[str, ...], plan_file: Optional[str], detailed_exitcode: bool) -> None:
    """Add packages to an environment, built as a new one beside it.

    REQUIREMENT... are package names (with a version), git URLs or project folders. The new
    environment is made by the command that made the old one, with what that one had added
    kept, and is switched in only if its doctor passes; the old one stays for rollback."""
    from jetson_install.cli.commands.add import addition
    from jetson_install.cli.render import addition_line

    if plan_file:
        _apply("add", {"plan_file": plan_file, "dry_run": dry_run, "yes": yes, "as_json": as_json,
                       "detailed_exitcode": detailed_exitcode})
        return
    flags = tuple(flag for flag, given in (("--dry-run", dry_run), ("--yes", yes), ("--json", as_json),
                                           ("--detailed-exitcode", detailed_exitcode)) if given)
    flags += tuple(word for command in check_commands for word in ("--check-command", command))
    made = addition(venv, requirements, flags, options.typed())
    click.echo(addition_line(made.new, made.link, made.kept, made.command), err=True)
    parsed = options.parsed(made.target, made.command.argv[1:])
    _install(made.target, parsed.params, made.command, made, parsed)  # a fix names it, as if typed
