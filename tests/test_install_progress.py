"""What a user sees while `jetson-install obliteratus` downloads: a loopback index holds a
stub wheel of a few MB half-sent until the test has seen the progress it is after (whatever the
machine's load), on a pipe and on a pseudo-terminal."""

from __future__ import annotations

import base64
import errno
import fcntl
import hashlib
import json
import os
import pty
import re
import shutil
import struct
import subprocess
import termios
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

import pytest
from support import OBLITERATUS_DEPENDENCIES, build_wheel, present
from support.stub_projects import make_obliteratus_source
from support.installer import Installer
from support.stub_projects import IndexDirs
from support.index_server import LoopbackIndex
from support.catalogs import stub_catalog_text
from support.wheels import altered_wheel

from jetson_install.tools.progress import format_bytes, format_seconds

TOP = Path(__file__).resolve().parent.parent
# Each test installs, with a download held until its progress has been shown.
pytestmark = pytest.mark.slow

BIG = "bigdata-stub"
INTERVAL = 0.5  # JETSON_INSTALL_PROGRESS_INTERVAL: a plain progress line every half second
SLOW_SECONDS = 4.0  # how long the tool's own download of a slow vendor file takes
MISSING_EXTRA = "does not have an extra named `quantization`"
COLUMNS = 100


@pytest.fixture
def slow_public(private_index_dirs: IndexDirs, start_index: Callable[..., LoopbackIndex]) -> Tuple[LoopbackIndex, int]:
    """The public index plus a 2.4 MiB wheel it holds half-sent until release(); and that wheel's size."""
    blob = base64.b64encode(os.urandom(2_500_000)).decode()  # random: the wheel cannot compress it away
    wheel = build_wheel(private_index_dirs.public, BIG, "1.0", modules={"bigdata_stub/blob.py": f"BLOB = {blob!r}\n"})
    return start_index(private_index_dirs.public, name="slow-public", hold=(BIG,), cache_files=True), wheel.stat().st_size


def release_when(index: LoopbackIndex, *words: str) -> Callable[[str], None]:
    """An on_line that releases `index`'s held downloads once a line says all of `words`."""
    def on_line(line: str) -> None:
        if all(word in line for word in words):
            index.release()

    return on_line


@pytest.fixture
def source_without_the_extra(tmp_path: Path) -> Path:
    """Like OBLITERATUS 0.1.2: no `quantization` extra; and it needs the big wheel."""
    return make_obliteratus_source(tmp_path / "OBLITERATUS-0.1.2", "0.1.2",
                                   dependencies=OBLITERATUS_DEPENDENCIES + (BIG,), extras={"dev": ("pytest>=7.0",)})


def run_reading_stderr(argv: List[str], env: Dict[str, str], on_line: Callable[[str], None] = lambda line: None
                       ) -> Tuple[int, Dict[str, Any], List[Tuple[float, str]]]:
    """Run the CLI with stderr a pipe; each stderr line with the time it arrived, given to
    `on_line` as it arrives."""
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                               text=True, env=env)
    watchdog = threading.Timer(300, process.kill)
    watchdog.start()
    lines: List[Tuple[float, str]] = []
    try:
        for line in present(process.stderr):
            lines.append((time.monotonic(), line.rstrip("\n")))
            on_line(lines[-1][1])
        stdout = present(process.stdout).read()
        code = process.wait()
    finally:
        watchdog.cancel()
    return code, json.loads(stdout) if stdout.strip() else {}, lines


def test_a_slow_download_shows_progress_before_its_step_ends_and_the_json_counts_its_bytes(
    tmp_path: Path, cli_env: Dict[str, str], vendor_index: LoopbackIndex, slow_public: Tuple[LoopbackIndex, int], source_without_the_extra: Path
) -> None:
    index, wheel_size = slow_public
    env = dict(cli_env, JETSON_INSTALL_PROGRESS_INTERVAL=str(INTERVAL))
    installer = Installer(tmp_path / "obl", env, vendor_index.url, index.url, source_without_the_extra)
    # The source has no `quantization` extra, so the install does not ask for it; an addition
    # that names an extra its package lacks draws uv's warning, which the user must see. The
    # download goes on once its progress line is out: a line printed while it ran.
    code, data, lines = run_reading_stderr(installer.argv() + ["--with", f"{BIG}[quantization]"], env,
                                           release_when(index, "so far:", f"downloading {BIG}"))
    text = "\n".join(line for _, line in lines)
    assert code == 0, text
    target = next(step for step in data["plan_steps"] if step["id"] == "target")
    assert any(part.startswith("obliteratus @ ") for part in target["command"])
    heading = next(n for n, (_, line) in enumerate(lines) if line.startswith("[5/9] target:"))
    end = next(n for n in range(heading, len(lines)) if re.match(r"      done in .*, [0-9.]+ MiB downloaded$", lines[n][1]))
    during = [(at, line) for at, line in lines[heading + 1:end] if "so far:" in line and f"downloading {BIG}" in line]
    assert during, text
    steps = {step["id"]: step for step in data["steps"]}
    # The announced size (uv rounds to 0.1 MiB); the small stub wheels go unannounced, so count 0.
    assert steps["target"]["downloaded_bytes"] == pytest.approx(wheel_size, rel=0.05)
    # The vendor files are the tool's own downloads, each counted to the byte; the vendor step
    # installs those files and downloads nothing.
    fetched = {f["file"] for f in data["resolution"]["files"]}
    assert steps["fetch"]["downloaded_bytes"] == sum((vendor_index.root / name).stat().st_size for name in fetched)
    assert steps["vendor"]["downloaded_bytes"] == 0
    assert steps["target"]["seconds"] >= INTERVAL  # the download's time is the step's: it lasted past a progress line
    summary = next(line for _, line in lines if line.startswith("steps: "))
    assert f"target {format_seconds(steps['target']['seconds'])}, {format_bytes(steps['target']['downloaded_bytes'])};" in summary
    # uv's warning about the extra the addition lacks reaches stderr and the JSON.
    assert any(MISSING_EXTRA in warning for warning in data["warnings"]), data["warnings"]
    assert any(line.startswith("warning: uv (target): ") and MISSING_EXTRA in line for _, line in lines), text

    # A changed source reinstalls, and the big wheel now comes from uv's cache: 0 bytes downloaded.
    changed = tmp_path / "changed-source"
    shutil.copytree(source_without_the_extra, changed)
    (changed / "obliteratus" / "extra.py").write_text("X = 1\n")
    index.clear_requests()
    code, data, lines = run_reading_stderr(installer.argv(changed), env)
    assert code == 0, "\n".join(line for _, line in lines)
    assert not [name for name in index.downloaded_files() if name.startswith("bigdata_stub")]
    assert {step["id"]: step["downloaded_bytes"] for step in data["steps"]}["target"] == 0


def test_on_a_terminal_the_step_has_one_live_line_redrawn_in_place(
    tmp_path: Path, cli_env: Dict[str, str], vendor_index: LoopbackIndex, slow_public: Tuple[LoopbackIndex, int], source_without_the_extra: Path
) -> None:
    index, _ = slow_public
    installer = Installer(tmp_path / "obl", cli_env, vendor_index.url, index.url, source_without_the_extra)
    live = re.compile(rf"\r      [^\r\n]*downloading {BIG}[^\r\n]*?\x1b\[K")
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, COLUMNS, 0, 0))
    process = subprocess.Popen(installer.argv(), stdout=subprocess.PIPE, stderr=terminal, stdin=subprocess.DEVNULL,
                               env=cli_env)
    os.close(terminal)
    watchdog = threading.Timer(300, process.kill)
    watchdog.start()
    seen = b""
    try:
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError as exc:  # EIO: the terminal's other end closed
                assert exc.errno == errno.EIO  # noqa: PT017 - the read loop ends here, no raise is under test
                break
            if not chunk:
                break
            seen += chunk
            if len(live.findall(seen.decode("utf-8", "replace"))) >= 3:
                index.release()  # the live line was redrawn while the download ran: it may end
        stdout = present(process.stdout).read()
        code = process.wait()
    finally:
        watchdog.cancel()
        os.close(controller)
    shown = seen.decode("utf-8", "replace")
    assert code == 0, shown
    assert json.loads(stdout)["status"] == "installed"
    target = shown[shown.index("[5/9] target:"):shown.index("[6/9] protect:")]
    redraws = re.findall(r"\r      ([^\r\n]*?)\x1b\[K", target)
    assert len(redraws) >= 3, target  # the clock ticks: the same line, drawn again and again
    assert all(len("      " + line) < COLUMNS for line in redraws)  # never wrapped: redrawn in place
    assert any(f"downloading {BIG}" in line for line in redraws), redraws
    # Its outcome replaces the live line: cleared, then written once, on a line of its own.
    assert re.search(r"\r\x1b\[K      done in [^\r\n]*MiB downloaded\r\n$", target), target
    assert "so far:" not in shown  # no plain lines on a terminal


def test_the_fetch_step_shows_a_slow_vendor_download_while_it_runs_and_counts_its_bytes(
        tmp_path: Path, cli_env: Dict[str, str], private_index_dirs: IndexDirs, start_index: Callable[..., LoopbackIndex],
        public_index: LoopbackIndex, obliteratus_source: Path) -> None:
    # The vendor files are the tool's own downloads: a slow torch shows as uv's downloads do.
    [torch] = private_index_dirs.vendor.glob("torch-*.whl")
    blob = base64.b64encode(os.urandom(2_500_000)).decode()
    altered_wheel(torch, torch.parent, members={"torch/blob.py": f"BLOB = {blob!r}\n".encode()},
                  record=lambda text: text + f"torch/blob.py,sha256={_digest(blob)},{len(blob) + 10}\n")
    catalog = tmp_path / "wheels-index.toml"
    catalog.write_text(stub_catalog_text((TOP / "wheels-index.toml").read_text(), private_index_dirs.vendor))
    env = dict(cli_env, JETSON_INSTALL_PROGRESS_INTERVAL=str(INTERVAL), JETSON_INSTALL_WHEELS_INDEX=str(catalog))
    # Sent slowly, not held: the tool's own download reports the bytes as they come.
    vendor = start_index(private_index_dirs.vendor, name="slow-vendor", slow={"torch": SLOW_SECONDS})
    installer = Installer(tmp_path / "obl", env, vendor.url, public_index.url, obliteratus_source)
    code, data, lines = run_reading_stderr(installer.argv(), env)
    text = "\n".join(line for _, line in lines)
    assert code == 0, text
    heading = next(n for n, (_, line) in enumerate(lines) if re.match(r"\[3/[0-9]+\] fetch:", line))
    end = next(n for n in range(heading, len(lines)) if re.match(r"      .*\(done in .*, [0-9.]+ MiB downloaded\)$",
                                                                  lines[n][1]))
    during = [(at, line) for at, line in lines[heading + 1:end] if "so far:" in line and f"downloading {torch.name}" in line]
    assert during, text
    assert lines[end][0] - during[0][0] >= 1.0, text  # printed while the download ran, not after it
    fetched = {f["file"] for f in data["resolution"]["files"]}
    steps = {step["id"]: step for step in data["steps"]}
    assert steps["fetch"]["downloaded_bytes"] == sum((vendor.root / name).stat().st_size for name in fetched)
    assert steps["fetch"]["seconds"] >= SLOW_SECONDS * 0.9


def _digest(blob: str) -> str:
    data = f"BLOB = {blob!r}\n".encode()
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
