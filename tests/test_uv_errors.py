"""uv's real failure messages -> the one-line cause and the fix a user sees.

The texts in tests/resources/uv-errors/ are uv 0.13.9's stderr, captured as written.
"""

from __future__ import annotations

from typing import Tuple
import errno
from pathlib import Path

import pytest

from jetson_install.planning.fixes import StepContext, fix_for_os_error, fix_for_uv_failure, repository_of
from jetson_install.planning.rerun import Rerun
from jetson_install.tools.uv_errors import UvFailure, read_uv_failure

CAPTURED = Path(__file__).parent / "resources" / "uv-errors"
RERUN = Rerun(("obliteratus", "--venv", "/srv/obl", "--vendor-index", "https://mirror.example/jp6", "--yes"))


def explain(name: str, step: str, index: "str | None" = None, fallback: bool = False, source: str = "https://g.example/O",
            location: str = "/srv/obl.d") -> Tuple[UvFailure, str]:
    failure = read_uv_failure((CAPTURED / f"{name}.txt").read_text())
    context = StepContext(step, RERUN, index, Path(location), source, fallback)
    return failure, fix_for_uv_failure(failure, context, usual="USUAL CONFLICT FIX")


@pytest.mark.parametrize(("name", "step"), [("venv-disk-full", "environment"), ("install-disk-full", "target")])
def test_a_full_disk_is_named_in_any_step(name: str, step: str) -> None:
    failure, fix = explain(name, step, location="/tmp/i11b-full")  # the captured run built there
    assert "no space left on device" in failure.summary
    # DIR.d's folder: a failed first install removes DIR.d itself.
    assert fix.startswith("free disk space on the filesystem of /tmp (df -h /tmp), then run:")
    assert "apt-get" not in fix and "torch" not in fix and "USUAL" not in fix


def test_a_hash_mismatch_keeps_both_hashes_on_one_line() -> None:
    failure, fix = explain("hash-mismatch", "target", index="https://mirror.example/simple")
    assert failure.kind == "hash-mismatch"
    assert failure.summary.endswith(
        "Hash mismatch for `numpy==1.26.4` (expected sha256:" + "0" * 64
        + ", computed sha256:40c1bb3d87550c866d5f53a82a742485588d4d26640aed60a34522dce908d465)")
    assert "https://mirror.example/simple served a file that does not match" in fix


def test_a_missing_git_tag_is_not_called_an_unreachable_index() -> None:
    failure, fix = explain("git-missing-tag", "target")
    assert failure.kind == "git-ref" and failure.subject == "v9"
    assert "no branch, tag or commit 'v9'" in failure.summary
    assert "git ls-remote --heads --tags https://g.example/O" in fix
    assert "did not answer" not in fix
    assert fix.endswith("jetson-install obliteratus --venv /srv/obl --vendor-index https://mirror.example/jp6 --yes --ref REF")


def test_a_mirror_without_pip_for_the_seed_says_what_the_mirror_lacks() -> None:
    failure, fix = explain("seed-no-pip", "environment", index="https://mirror.example/simple")
    assert failure.kind == "seed-packages"
    assert "pip was not found in the package registry" in failure.summary
    assert fix.startswith("https://mirror.example/simple must carry pip, setuptools and wheel")
    assert "apt-get" not in fix


def test_a_seed_that_fails_because_the_index_is_down_is_a_network_failure() -> None:
    failure, fix = explain("seed-index-refused", "environment", index="http://127.0.0.1:9/simple")
    assert failure.kind == "network"
    assert fix.startswith("http://127.0.0.1:9/simple did not answer")


def test_the_repository_of_a_git_reference_drops_its_ref() -> None:
    assert repository_of("git+https://github.com/o/r@v0.1.3") == "https://github.com/o/r"
    assert repository_of("git+ssh://git@host/o/r") == "ssh://git@host/o/r"
    assert repository_of("git+file:///a/r@main") == "file:///a/r"
    assert repository_of("file:///a/r") == "file:///a/r"


def test_a_dangling_symlink_in_the_source_is_named() -> None:
    failure, fix = explain("source-dangling-symlink", "target")
    assert failure.subject == "/tmp/i11b-cap/w/srcdangle/OBLITERATUS/obliteratus/dangling.py"
    assert fix.startswith(f"{failure.subject} is missing (a dangling symlink?)")


def test_a_directory_uv_may_not_create_is_a_permission_fix() -> None:
    failure, fix = explain("venv-permission-denied", "environment")
    assert failure.kind == "permission" and "Permission denied" in failure.summary
    assert fix.startswith("make /tmp/i11b-perm/notmine writable")


def test_a_conflict_keeps_the_steps_own_fix_and_a_missing_vendor_pin_offers_the_fallback() -> None:
    failure, fix = explain("conflict-torch", "target")
    assert failure.kind == "unsatisfiable" and "needs-newer-torch depend on torch>=2.6" in failure.summary
    assert fix == "USUAL CONFLICT FIX"
    _, vendor_fix = explain("vendor-missing-pin", "vendor", index="https://mirror.example/jp6", fallback=True)
    assert "https://mirror.example/jp6 does not carry the pinned vendor builds" in vendor_fix
    assert vendor_fix.endswith("jetson-install obliteratus --venv /srv/obl --yes --vendor-fallback")


@pytest.mark.parametrize(("name", "python"), [("compile-requires-python-requested", "3.8"),
                                             ("compile-requires-python-current", "3.8.18")])
def test_a_requires_python_the_resolution_misses_is_named_with_a_python_that_meets_it(name: str, python: str) -> None:
    """Not "check that the index answers": what is wrong is the Python, and the fix says which."""
    failure, fix = explain(name, "target")
    assert (failure.kind, failure.subject) == ("requires-python", f"{python} >=3.10")
    assert failure.summary.startswith(f"Because the {name.rsplit('-', 1)[1]} Python version (")
    assert fix == (f"what it installs needs Python>=3.10, and the environment's is Python {python}: run with a Python "
                   "that satisfies it: jetson-install obliteratus --venv /srv/obl --vendor-index "
                   "https://mirror.example/jp6 --yes --python PATH")


def test_a_vendor_index_that_is_down_offers_the_fallback_without_repeating_an_option() -> None:
    failure, fix = explain("index-refused", "vendor", index="https://mirror.example/jp6", fallback=True)
    assert failure.kind == "network"
    assert "use the channel's fallback source: jetson-install obliteratus --venv /srv/obl --yes --vendor-fallback" in fix
    assert "use another vendor index: jetson-install obliteratus --venv /srv/obl --yes --vendor-index URL" in fix
    # A mirror is tried after the vendor index the command names, which it keeps.
    assert ("add a mirror of its recorded builds: jetson-install obliteratus --venv /srv/obl --vendor-index "
            "https://mirror.example/jp6 --yes --mirror URL") in fix
    assert all(command.count("--vendor-index") <= 1 for command in fix.split("; "))


def test_an_unknown_failure_quotes_uvs_last_cause_instead_of_guessing() -> None:
    text = ("error: Failed to prepare distributions\n  cause: Failed to fetch wheel: torch==2.8.0\n"
            "  cause: Zip file is corrupt: invalid central directory\n")
    failure = read_uv_failure(text)
    assert failure.kind == "other"
    assert failure.summary == "Failed to prepare distributions: Zip file is corrupt: invalid central directory"
    context = StepContext("vendor", RERUN, None, Path("/srv/obl.d"), "x")
    assert fix_for_uv_failure(failure, context, "USUAL").startswith("fix the cause uv names above")


def test_the_terminal_form_of_a_cause_chain_reads_the_same() -> None:
    text = "  × No solution found when resolving dependencies:\n  ╰─▶ Because there is no version of torch==9.9 and you require torch==9.9, we can conclude that your requirements are unsatisfiable.\n"
    failure = read_uv_failure(text)
    assert failure.kind == "unsatisfiable" and failure.summary.startswith("Because there is no version of torch==9.9")


def test_rerun_replaces_an_option_in_either_spelling_and_quotes_paths() -> None:
    rerun = Rerun(("obliteratus", "--venv=/my envs/obl", "--ref", "v1", "--no-verify"))
    assert str(rerun.with_option("--venv", "DIR")) == "jetson-install obliteratus --ref v1 --no-verify --venv DIR"
    assert str(rerun.with_option("--ref", "REF")) == "jetson-install obliteratus '--venv=/my envs/obl' --no-verify --ref REF"
    assert str(rerun.with_flag("--no-verify")).count("--no-verify") == 1


@pytest.mark.parametrize(("number", "start"), [
    (errno.EXDEV, "keep DIR and DIR.d on one filesystem"),
    (errno.ENOSPC, "free disk space on the filesystem of '/a b'"),
    (errno.EACCES, "make '/a b' writable"),
    (errno.EIO, "fix the cause above"),
])
def test_operating_system_errors_get_the_fix_for_their_number(number: int, start: str) -> None:
    assert fix_for_os_error(OSError(number, "x", "/a b"), "run: again").startswith(start)


def test_a_dangling_symlink_met_by_the_tool_is_named(tmp_path: Path) -> None:
    link = tmp_path / "gone.py"
    link.symlink_to(tmp_path / "nowhere")
    assert fix_for_os_error(OSError(errno.ENOENT, "No such file", str(link)), "run: x").startswith(
        f"{link} is a dangling symlink")


@pytest.mark.parametrize(("name", "step", "url"), [
    ("compile-index-401", "resolve", "http://127.0.0.1:45793/simple"),
    ("install-file-401", "lock", "http://127.0.0.1:45793/files/six-1.16.0-py3-none-any.whl"),
    # With COLUMNS=80 (a terminal's width, passed on by a CI runner) uv wraps its lines.
    ("compile-file-401-wrapped", "resolve", "http://127.0.0.1:45467/files/torch-2.5.0a0+872d972e41.nv24.08-py3-none-any.whl"),
])
def test_a_mirror_refusing_the_credentials_says_so_not_not_found(name: str, step: str, url: str) -> None:
    # uv calls the package "not found in the package registry" and says why only in a hint.
    failure, fix = explain(name, step, index="http://127.0.0.1:45793/simple")
    assert failure.kind == "refused"
    assert failure.summary == f"{url} refused the request (HTTP 401): check the credentials"
    if step == "lock":
        # The lock's own URLs, with no --wheelhouse: no URL of the user's to carry credentials.
        assert fix.startswith("give 127.0.0.1's user and token in ~/.netrc (machine 127.0.0.1 login USER password "
                              "TOKEN; ") and "URL you pass" not in fix
    else:
        assert fix.startswith("give the mirror's user and token in the URL you pass") and "~/.netrc" in fix
    assert fix.endswith("then run: jetson-install obliteratus --venv /srv/obl --vendor-index https://mirror.example/jp6 --yes")


def test_a_lock_installed_from_a_served_wheelhouse_may_carry_credentials_in_its_url() -> None:
    from jetson_install.planning.rerun import Rerun

    failure = read_uv_failure((CAPTURED / "install-file-401.txt").read_text())
    rerun = Rerun(("obliteratus", "--lock", "f.lock", "--wheelhouse=https://mirror.example/house", "--yes"))
    fix = fix_for_uv_failure(failure, StepContext("lock", rerun, None, Path("/srv/obl.d"), ""), usual="USUAL")
    assert fix.startswith("give the mirror's user and token in the URL you pass")
