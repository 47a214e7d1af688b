"""Index URLs are judged as uv will read them: a URL that parsers read differently is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import isolated_env
from support.cli import CliResult, run_cli

SAMPLE = "sample:agx-orin-64gb-jp6.2"


def plan_with(url: str, tmp_path: Path) -> CliResult:
    return run_cli("plan", "obliteratus", "--root", SAMPLE, "--vendor-index", url, env=isolated_env(tmp_path))


@pytest.mark.parametrize(("url", "said"), [
    ("http://192.0.2.1\\@127.0.0.1/simple", "contains a backslash"),  # uv requests http://192.0.2.1/...
    ("http://127.0.0.1\t.evil.example/simple", "contains the character '\\t'"),
    ("http://evil.example\n@127.0.0.1/simple", "contains the character '\\n'"),
    ("http://0127.0.0.1/simple", "plain http to a remote host"),  # octal to uv: 87.0.0.1
    ("http://%31%32%37.0.0.1/simple", "plain http to a remote host"),
])
def test_a_url_read_differently_by_uv_is_refused(url: str, said: str, tmp_path: Path) -> None:
    result = plan_with(url, tmp_path)
    assert result.returncode == 2, result.stdout
    assert said in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080/simple", "http://[::1]:8080/simple", "http://localhost/simple"])
def test_plain_http_on_loopback_still_passes(url: str, tmp_path: Path) -> None:
    result = plan_with(url, tmp_path)
    assert result.returncode == 0, result.stderr
    # The plan takes the loopback index it was given, not the channel's own source.
    assert f"  vendor    {url}   (--vendor-index)" in result.stdout.splitlines(), result.stdout
    assert f"install the vendor builds from {url}," in result.stdout
