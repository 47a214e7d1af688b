"""One install run, as the executor keeps it and its steps' handlers see it (plan.Execution):
the plan as it stands, the steps done so far, and each command's outcome, whose failure becomes
the step's, with the fix for its cause. The fixes (planning/fixes.py, index_fixes.py, and uv's
failure patterns) are imported where a step failed: a no-op re-run, which runs no step, never
loads them."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Callable, List, Mapping, Optional, Sequence, Tuple

from jetson_install.base.errors import StepFailed
from jetson_install.base.layout import VENDOR_PYLOCK
from jetson_install.base.process import Completed
from jetson_install.base.steps import Step, StepResult
from jetson_install.planning.plan import Execution, Plan
from jetson_install.planning.rerun import Rerun
from jetson_install.tools import runner, uv
from jetson_install.tools.progress import Display, StepProgress

if TYPE_CHECKING:
    from jetson_install.planning.fixes import StepContext

__all__ = ["Run", "StepHandler"]


class Run(Execution):
    """One install run: the plan as it stands, the steps done so far, and how to report them."""

    def __init__(self, plan: Plan, progress: Display, rerun: Rerun) -> None:
        self._plan = plan
        self.display = progress
        self.command = rerun
        self.results: List[StepResult] = []
        self.warnings: List[str] = list(plan.warnings)
        self.removed: List[Tuple[str, int]] = []  # what killed runs had left, removed by this one
        self.damaged: List[str] = []  # how the previous environment had changed, when that is why this run rebuilds
        self.number = 0
        self._current: Optional[StepProgress] = None
        self._staging: Optional[Path] = None
        self.step_id = ""

    # -- what a handler may use (plan.Execution) -------------------------------------------------
    @property
    def plan(self) -> Plan:
        return self._plan

    @plan.setter
    def plan(self, plan: Plan) -> None:
        self._plan = plan

    @property
    def staging(self) -> Path:
        assert self._staging is not None
        return self._staging

    @property
    def python(self) -> str:
        return str(self.staging / "bin" / "python")

    @property
    def rerun(self) -> Rerun:
        return self.command

    @property
    def current(self) -> Optional[StepProgress]:
        return self._current

    def progress(self, line: str) -> None:
        self.display(line)

    def run(self, command: Sequence[str], fix: str, env: Optional[Mapping[str, str]] = None) -> Completed:
        """Run one command of the running step as the plan wrote it (`env`: variables it runs
        with besides the tool's own); uv's warnings become the run's warnings, and a failure the
        step's, with the fix for its cause."""
        program = command[0]
        if program == uv.PROGRAM:
            result = runner.run_uv(command, indexes=self.plan.indexes, sources=self.plan.sources, watch=self._current,
                                   env=env)
        else:
            result = runner.run(command, timeout=3600, env=env, on_tick=self._current.tick if self._current else None)
        if program == uv.PROGRAM:
            # uv resolving the vendor set (the fetch step's) fails as asking the vendor source does: its fixes.
            vendor = any(part.endswith(f"/{VENDOR_PYLOCK}") for part in command)
            self.outcome(result, fix, _named_index(command), fixes_as="vendor" if vendor else None)
        return result

    # -- the run itself ----------------------------------------------------------------------------
    def learned(self, plan: Plan) -> None:
        """What a step learned (the versions it installed, the companions' hashes) becomes the
        plan the rest of the run carries out; the steps already run stay as they ran."""
        done = self.plan.steps[:self.number]
        self.plan = dataclasses.replace(plan, steps=done + plan.steps[len(done):])

    def start(self, staging: Path) -> None:
        self._staging = staging

    def step(self, step: Step, handler: StepHandler) -> None:
        """Run one step by its kind's handler, reporting it and keeping its result."""
        self.number += 1
        self.step_id = step.id
        current = self._current = self.display.start(
            step.id, f"[{self.number}/{len(self.plan.steps)}] {step.id}: {step.title}")
        status, detail = "failed", ""
        try:
            detail = handler(step, self)
            status = "ok"
        except OSError as exc:
            from jetson_install.planning.fixes import fix_for_os_error, os_error_reason

            raise StepFailed(step.id, f"step '{step.id}' failed: {os_error_reason(exc)}",
                             fix_for_os_error(exc, f"run: {self.command}")) from None
        except KeyboardInterrupt:
            status = "interrupted"
            raise
        finally:
            self._current = None
            self.results.append(StepResult(step.id, status, current.elapsed(), detail, current.downloaded_bytes))
            self.display.finish(current, status, detail)

    def outcome(self, result: Completed, usual_fix: str, index: Optional[str] = None,
                fixes_as: Optional[str] = None) -> None:
        """Fail the step with uv's own reason and the fix for that cause; `usual_fix` is the
        step's fix for a resolution conflict, `fixes_as` the step whose fixes apply (its own)."""
        step_id = self.step_id
        self.warnings.extend(f"uv ({step_id}): {warning}" for warning in uv.warnings_in(result)
                             if f"uv ({step_id}): {warning}" not in self.warnings)
        if result.ok:
            return
        if result.timed_out:
            raise StepFailed(step_id, f"step '{step_id}' failed: uv did not finish in time",
                             f"check the network and the indexes, then run: {self.command}")
        from jetson_install.planning.fixes import fix_for_uv_failure
        from jetson_install.tools.uv_errors import read_uv_failure

        failure = read_uv_failure(result.stderr)
        raise StepFailed(step_id, f"step '{step_id}' failed: {failure.summary}",
                         fix_for_uv_failure(failure, self._context(fixes_as or step_id, index), usual_fix))

    def _context(self, step_id: str, index: Optional[str]) -> StepContext:
        from jetson_install.planning.fixes import StepContext, repository_of
        from jetson_install.planning.index_fixes import offers_fallback

        plan = self.plan
        return StepContext(step_id, self.command, index, Path(plan.venv + ".d"),
                           repository_of(plan.source_url or ""),
                           fallback=step_id == "vendor" and offers_fallback(plan))


#: What the executor calls for a step of one kind; returns the step's detail.
StepHandler = Callable[[Step, Run], str]


def _named_index(command: Sequence[str]) -> Optional[str]:
    """The index a uv command asks, as its --default-index names it (credentials stay apart)."""
    for number, part in enumerate(command[:-1]):
        if part == "--default-index":
            return command[number + 1].split("=", 1)[-1] if command[number + 1].startswith("private=") \
                else command[number + 1]
    return None
