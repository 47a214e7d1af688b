"""Detection reads only inside the root, in bounded pieces: hostile roots (a FIFO, a link to
/dev/zero or out of the root, a huge file, an unreadable folder) and the real procfs of this
machine's own / all give an answer, never a hang, a traceback or a file from outside."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import List, Tuple, Union

import pytest
import support.cli as support_cli
from support import nobody_runs

from jetson_install.base.sourced import Sourced
from jetson_install.board.platform import Platform, detect
from jetson_install.board.samples import SAMPLES_DIR

SAMPLE = SAMPLES_DIR / "agx-orin-64gb-jp6.2"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    copy = tmp_path / "root"
    shutil.copytree(SAMPLE, copy)
    return copy


def detect_within(root: Path, seconds: float = 20.0) -> Platform:
    """detect(root), or fail the test if it does not return in time (a FIFO read blocks forever)."""
    outcome: List[Platform] = []
    worker = threading.Thread(target=lambda: outcome.append(detect(root)), daemon=True)
    worker.start()
    worker.join(seconds)
    assert outcome, "detect did not return"
    return outcome[0]


# Ubuntu's os-release says ID_LIKE=debian, so distro's version() also reads etc/debian_version.
def test_a_fifo_in_etc_does_not_hang(root: Path) -> None:
    os.mkfifo(root / "etc" / "debian_version")
    os.mkfifo(root / "etc" / "lsb-release")
    platform = detect_within(root)
    assert platform.ubuntu == "22.04" and platform.sources["ubuntu"] == "etc/os-release"


def test_files_linked_to_dev_zero_are_not_read(root: Path) -> None:
    (root / "etc" / "debian_version").symlink_to("/dev/zero")
    assert detect_within(root).ubuntu == "22.04"
    (root / "etc" / "os-release").unlink()
    (root / "etc" / "os-release").symlink_to("/dev/zero")
    assert detect_within(root).sources["ubuntu"] == "default for L4T R36"


def test_os_release_linked_out_of_the_root_is_not_read(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside-os-release"
    outside.write_text('ID=ubuntu\nVERSION_ID="99.99"\n')
    (root / "etc" / "os-release").unlink()
    (root / "etc" / "os-release").symlink_to(os.path.relpath(outside, root / "etc"))
    assert detect_within(root).ubuntu != "99.99"


def test_a_huge_os_release_is_read_only_in_part(root: Path) -> None:
    with open(root / "etc" / "os-release", "ab") as handle:
        handle.truncate(1 << 30)  # 1 GiB, sparse
    platform = detect_within(root, seconds=20)
    assert platform.ubuntu == "22.04"  # its first lines still say so


def test_this_machines_own_root_gives_kernel_and_arch() -> None:
    platform = detect(Path("/"), Sourced("36.4.3", "--l4t"))
    assert platform.kernel == os.uname().release
    assert platform.arch == os.uname().machine and platform.sources["arch"] == "uname"


def test_another_root_says_its_arch_from_its_kernel(root: Path) -> None:
    assert detect(root).arch == "aarch64"
    (root / "proc" / "sys" / "kernel" / "arch").write_text("riscv64\n")
    platform = detect(root)
    assert platform.arch == "riscv64" and platform.sources["arch"] == "proc/sys/kernel/arch"


def run_cli(*args: str, user: bool = False) -> Union[subprocess.CompletedProcess[str], support_cli.CliResult]:
    """Run from /; as another user (`nobody`), in a process of its own."""
    if not user:
        return support_cli.run_cli(*args, cwd="/")
    if not nobody_runs(sys.executable):
        pytest.skip(f"the user nobody cannot start {sys.executable} (a pyenv build loads its libpython from under /root)")
    argv = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", sys.executable, "-m", "jetson_install", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd="/")


def test_install_on_this_non_jetson_machine_exits_3() -> None:
    if os.uname().machine == "aarch64":
        pytest.skip("this machine is aarch64")
    for command in (["plan", "obliteratus"], ["obliteratus", "--dry-run"], ["obliteratus", "--yes"]):
        result = run_cli(*command, "--root", "/", "--l4t", "36.4.3")
        assert result.returncode == 3, (command, result.stderr)
        assert f"this machine is {os.uname().machine}" in result.stdout + result.stderr


def test_another_root_goes_ahead_with_a_warning() -> None:
    if os.uname().machine == "aarch64":
        pytest.skip("this machine is aarch64")
    result = run_cli("plan", "obliteratus", "--root", "sample:agx-orin-64gb-jp6.2")
    assert result.returncode == 0
    assert f"the environment is made for this machine's interpreter ({os.uname().machine})" in result.stderr


def test_sample_name_cannot_leave_the_samples_folder() -> None:
    result = run_cli("detect", "--root", "sample:../../..")
    assert result.returncode == 2 and "no such sample" in result.stderr


def _sample_root_nobody_reads() -> Tuple[Path, Path]:
    """A copy of the sample root, every file readable by the user 'nobody', and the temporary
    folder holding it (the caller removes it)."""
    top = Path(tempfile.mkdtemp(prefix="jetson-install-test-"))  # where the user 'nobody' can reach
    top.chmod(0o755)
    root = top / "root"
    shutil.copytree(SAMPLE, root)
    for path in [root, *root.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return top, root


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv to act as another user")
def test_an_unreadable_folder_is_missing_with_a_warning() -> None:
    top, root = _sample_root_nobody_reads()
    (root / "var" / "lib" / "dpkg").chmod(0o000)
    (root / "etc").chmod(0o711)  # its entries can be opened, not listed
    (root / "usr" / "local").chmod(0o000)
    try:
        result = run_cli("detect", "--root", str(root), "--json", user=True)
        unreadable_root = run_cli("detect", "--root", str(root / "usr" / "local"), user=True)
    finally:
        for path in (root / "var" / "lib" / "dpkg", root / "usr" / "local"):
            path.chmod(0o755)
        shutil.rmtree(top)
    assert unreadable_root.returncode == 2 and "cannot be read" in unreadable_root.stderr
    assert result.returncode == 0, result.stderr
    import json

    report = json.loads(result.stdout)
    assert report["l4t"] == "36.4.3" and report["sources"]["l4t"] == "etc/nv_tegra_release"
    assert any("var/lib/dpkg/status cannot be read (Permission denied)" in w for w in report["warnings"])


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv to act as another user")
def test_an_unreadable_release_file_is_named_as_unreadable_not_absent() -> None:
    top, root = _sample_root_nobody_reads()
    (root / "var" / "lib" / "dpkg" / "status").unlink()  # no other file gives the release
    for source in (root / "etc" / "apt").rglob("*nvidia*"):
        source.unlink()
    release = root / "etc" / "nv_tegra_release"
    release.chmod(0o000)
    try:
        result = run_cli("detect", "--root", str(root), user=True)
        fixed = run_cli("detect", "--root", str(root), "--l4t", "36.4.3", user=True)
    finally:
        shutil.rmtree(top)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert lines[-2] == (f"error: {release} cannot be read (Permission denied) and no other file gives the L4T release")
    assert lines[-1] == (f"  fix: make it readable (sudo chmod a+r {release}) or give the release explicitly: "
                         "--l4t 36.4.3 (or JETSON_L4T_VERSION=36.4.3)")
    # The fix's other half, as printed: the release given, the same root reads.
    assert fixed.returncode == 0, fixed.stderr


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv to act as another user")
def test_an_unreadable_release_file_with_a_fallback_warns_once() -> None:
    top, root = _sample_root_nobody_reads()
    (root / "etc" / "nv_tegra_release").chmod(0o000)
    try:
        result = run_cli("detect", "--root", str(root), user=True)
    finally:
        shutil.rmtree(top)
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        "warning: etc/nv_tegra_release cannot be read (Permission denied); L4T taken from var/lib/dpkg/status"]


# A detect stopped where distro reads the copies it staged in the temporary folder: it says which
# folder, and goes on once its stdin closes (a live run) or is killed there (SIGKILL runs no `finally`).
_STOPPED_IN_DISTRO = """
import sys
from pathlib import Path
import distro
from jetson_install.board.platform import detect
class Reading(distro.LinuxDistribution):
    def __init__(self, **options):
        print(options["root_dir"], flush=True)
        sys.stdin.read()
        super().__init__(**options)
distro.LinuxDistribution = Reading
print(detect(Path(sys.argv[1])).ubuntu, flush=True)
"""


def test_a_killed_detect_s_staged_release_files_are_removed_by_the_next_and_a_live_one_s_kept(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        processes: List["subprocess.Popen[str]"]) -> None:
    """distro reads the os-release copies from a folder in the temporary folder: each run killed
    while it read them left one more, which no run removed."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    source = str(Path(__file__).resolve().parent.parent)

    def stopped_in_distro() -> Tuple["subprocess.Popen[str]", Path]:
        run = subprocess.Popen([sys.executable, "-c", _STOPPED_IN_DISTRO, str(root)], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True,
                               env=dict(os.environ, TMPDIR=str(scratch), PYTHONPATH=source))
        processes.append(run)
        assert run.stdout is not None
        staged = Path(run.stdout.readline().strip())
        assert staged.parent == scratch and (staged / "etc" / "os-release").is_file(), staged
        return run, staged

    killed, killed_staged = stopped_in_distro()
    live, live_staged = stopped_in_distro()
    killed.kill()
    killed.wait(timeout=30)
    assert killed_staged.is_dir()  # what the kill left
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    assert detect(root).ubuntu == "22.04"
    lock = f".jetson-install-release-uid{os.geteuid()}.lock"  # the one file the runs keep there
    assert sorted(path.name for path in scratch.iterdir()) == sorted([lock, live_staged.name])
    assert live.stdin is not None and live.stdout is not None
    live.stdin.close()  # the live run reads its copies on, and removes its folder itself
    assert live.stdout.readline() == "22.04\n" and live.wait(timeout=60) == 0
    assert [path.name for path in scratch.iterdir()] == [lock]


@pytest.mark.parametrize(("made", "kind"), [(lambda path: path.mkdir(), "a directory"), (os.mkfifo, "a FIFO"),
                                            (lambda path: path.symlink_to(path.name), "a loop of symbolic links")])
def test_a_release_file_that_is_no_file_is_named_as_what_it_is_not_absent(root: Path, made: object, kind: str) -> None:
    """A new user's hostile roots: each was reported as "no etc/nv_tegra_release", which is there."""
    release = root / "etc" / "nv_tegra_release"
    release.unlink()
    made(release)  # type: ignore[operator]
    platform = detect_within(root)
    assert platform.l4t is not None and platform.sources["l4t"] == "var/lib/dpkg/status"
    assert f"etc/nv_tegra_release is {kind} (not a regular file); L4T taken from var/lib/dpkg/status" in platform.warnings
    (root / "var" / "lib" / "dpkg" / "status").unlink()  # no other file gives the release
    for source in (root / "etc" / "apt").rglob("*nvidia*"):
        source.unlink()
    result = support_cli.run_cli("detect", "--root", str(root))
    assert (result.returncode, result.stderr.splitlines()) == (2, [
        f"error: {release} is {kind} (not a regular file) and no other file gives the L4T release",
        "  fix: give the release explicitly: --l4t 36.4.3 (or JETSON_L4T_VERSION=36.4.3)"])
