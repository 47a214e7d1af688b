"""`jetson-install paths` as a user runs it: every folder and file the tool uses, and what gave
each (its default, a variable, the configuration file), the same folders the tool then writes."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict

from support.cli import run_cli

TOP = Path(__file__).resolve().parent.parent


def _paths(env: Dict[str, str]) -> Dict[str, Dict[str, Any]]:
    result = run_cli("paths", "--json", env=env)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["schema_version"] == 1
    return {place["name"]: place for place in data["paths"]}


def test_each_folder_says_the_variable_that_gave_it(tmp_path: Path) -> None:
    env = dict(os.environ)  # conftest gives each test XDG_* folders of its own
    places = _paths(env)
    data = Path(env["XDG_DATA_HOME"]) / "jetson-install"
    assert places["environments"]["path"] == str(data / "envs")
    assert places["environments"]["source"] == "variable" and places["environments"]["from"] == "XDG_DATA_HOME"
    assert places["environment list"]["path"] == str(data / "environments.txt")
    assert places["logs"]["path"] == str(Path(env["XDG_STATE_HOME"]) / "jetson-install" / "log")
    assert places["logs"]["from"] == "XDG_STATE_HOME"
    cache = Path(env["XDG_CACHE_HOME"]) / "jetson-install"
    assert places["bitsandbytes builds"]["path"] == str(cache / "builds")
    assert places["checked wheels"]["path"] == str(cache / "wheels") and places["checked wheels"]["from"] == "XDG_CACHE_HOME"
    assert places["interpreter cache"]["path"] == str(cache / "interpreters.json")
    assert places["configuration"]["path"] == str(Path(env["XDG_CONFIG_HOME"]) / "jetson-install" / "config.toml")
    assert places["configuration"]["exists"] is False
    assert places["catalog"]["path"] == str(TOP / "wheels-index.toml") and places["catalog"]["source"] == "default"
    assert places["catalog"]["detail"].startswith("sha256 ")
    assert places["uv"]["detail"].startswith("uv ") and Path(places["uv"]["path"]).is_file()
    assert places["uv cache"]["from"] == "XDG_CACHE_HOME"
    assert places["uv cache"]["path"] == str(Path(env["XDG_CACHE_HOME"]) / "uv")


def test_defaults_variables_and_the_configuration_each_say_so(tmp_path: Path) -> None:
    home = tmp_path / "home"
    config = tmp_path / "fleet.toml"
    config.write_text('wheelhouse = "/srv/wheelhouse"\n')
    catalog = tmp_path / "wheels-index.toml"
    catalog.write_text((TOP / "wheels-index.toml").read_text())
    env = {key: value for key, value in os.environ.items() if not key.startswith("XDG_")}
    env.update(HOME=str(home), JETSON_INSTALL_CONFIG=str(config), JETSON_INSTALL_WHEELS_INDEX=str(catalog),
               UV_CACHE_DIR=str(tmp_path / "uv-cache"))
    places = _paths(env)
    assert places["environments"]["path"] == str(home / ".local" / "share" / "jetson-install" / "envs")
    assert places["environments"]["source"] == "default" and places["environments"]["from"] is None
    assert places["logs"]["path"] == str(home / ".local" / "state" / "jetson-install" / "log")
    assert places["configuration"] == {**places["configuration"], "path": str(config), "exists": True,
                                       "source": "variable", "from": "JETSON_INSTALL_CONFIG"}
    assert places["wheelhouse"] == {**places["wheelhouse"], "path": "/srv/wheelhouse", "source": "configuration",
                                    "from": str(config)}
    assert places["catalog"]["from"] == "JETSON_INSTALL_WHEELS_INDEX" and places["catalog"]["path"] == str(catalog)
    assert places["uv cache"] == {**places["uv cache"], "path": str(tmp_path / "uv-cache"), "from": "UV_CACHE_DIR"}
    text = run_cli("paths", env=env)
    assert text.returncode == 0, text.stderr
    lines = {line.split("  ")[0]: line for line in text.stdout.splitlines()}
    assert lines["environments"].endswith(f"{home}/.local/share/jetson-install/envs (not there yet)  [default]")
    assert lines["configuration"].endswith(f"{config}  [$JETSON_INSTALL_CONFIG]")
    assert lines["wheelhouse"].endswith(f"/srv/wheelhouse (not there yet)  [config {config}]")


def test_what_the_tool_writes_is_where_paths_said(tmp_path: Path) -> None:
    env = dict(os.environ)
    places = _paths(env)
    # An install keeps its log where `paths` says the logs are, the log of one refused at its interpreter too.
    refused = run_cli("obliteratus", "--root", "sample:agx-orin-64gb-jp6.2", "--python", "/nonexistent/python",
                      "--venv", str(tmp_path / "venv"), "--yes", env=env)
    assert refused.returncode == 2, refused.stderr
    logs = list(Path(places["logs"]["path"]).iterdir())
    assert len(logs) == 1 and logs[0].name.startswith("obliteratus-") and logs[0].suffix == ".log"
    assert _paths(env)["logs"]["exists"] is True
    # `clean` removes it from the same place.
    cleaned = run_cli("clean", "--json", env=env)
    assert cleaned.returncode == 0, cleaned.stderr
    assert [item["path"] for item in json.loads(cleaned.stdout)["removed"]] == [str(logs[0])]


def test_a_broken_configuration_is_named_and_the_rest_still_shown(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("mirrors = 3\n")
    places = _paths({**os.environ, "JETSON_INSTALL_CONFIG": str(config)})
    assert places["configuration"]["detail"].startswith("unreadable: ")
    assert "mirrors" in places["configuration"]["detail"]
    assert "catalog" in places and "logs" in places
    missing = _paths({**os.environ, "JETSON_INSTALL_CONFIG": str(tmp_path / "none.toml")})
    assert missing["configuration"]["path"] is None and "no such file" in missing["configuration"]["detail"]
