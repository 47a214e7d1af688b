"""jetson-install doctor: prove that torch.cuda and bitsandbytes run CUDA kernels in an environment.

Read-only. The facts come from probe scripts run by the *target* interpreter
(jetson_install/probes/), one for everything torch and one for bitsandbytes, in
separate processes because a bitsandbytes kernel fault calls exit(1)
(BNB_CHECK_RETURN in csrc/compat.cuh, https://github.com/bitsandbytes-foundation/bitsandbytes),
and one, isolated from the environment's start-up hooks, for those hooks and the
vendor files. They run concurrently with ``uv pip check`` so that doctor costs
about one ``import torch, bitsandbytes``. Every check becomes one result; a probe that
crashes or hangs turns its checks into failures carrying its last stderr line,
and doctor itself never raises except for input it cannot act on.
"""

from jetson_install.doctor.checks_torch import arch_support
from jetson_install.doctor.report import (
    SCHEMA_VERSION,
    DoctorReport,
    render_lines,
)
from jetson_install.base.schema import evidence_schema
from jetson_install.doctor.request import DoctorRequest
from jetson_install.doctor.results import CheckResult
from jetson_install.doctor.run import CHECKS, CheckSpec, GPU_FREE_CHECKS, headline, list_checks, run_doctor

__all__ = [
    "SCHEMA_VERSION",
    "CHECKS",
    "GPU_FREE_CHECKS",
    "CheckSpec",
    "CheckResult",
    "DoctorReport",
    "DoctorRequest",
    "arch_support",
    "headline",
    "list_checks",
    "run_doctor",
    "render_lines",
    "evidence_schema",
]
