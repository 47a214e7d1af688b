"""`jetson-install export --uv`: a channel's settings in a uv project's pyproject.toml, as the
user runs the command: what it writes, what it keeps of the project's own, what it refuses and
where. The settings at work under uv itself: tests/test_export_uv_sync.py."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement

from support.cli import run_cli

from jetson_install.catalog.catalog import load_catalog
from jetson_install.catalog.constraints import channel_constraint_lines
from jetson_install.catalog.uv_export import fragment
from jetson_install.catalog.uv_project import on_a_jetson
from jetson_install.catalog.uv_settings import BOARD_MARKER, uv_settings

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

TOP = Path(__file__).resolve().parent.parent
SHAPES = TOP / "tests" / "resources" / "pyprojects"
INSTALLABLE = [channel.id for channel in load_catalog().channels if channel.installable]
MINIMAL = '[project]\nname = "proj"\nversion = "0.1.0"\nrequires-python = ">=3.10"\ndependencies = ["torch>=2.0"]\n'


def _project(tmp_path: Path, text: str = MINIMAL, name: str = "pyproject.toml") -> Path:
    folder = tmp_path / "proj"
    folder.mkdir(exist_ok=True)
    (folder / name).write_bytes(text.encode())
    return folder


def _data(folder: Path) -> Dict[str, Any]:
    return tomllib.loads((folder / "pyproject.toml").read_text())


def _uv(folder: Path) -> Dict[str, Any]:
    uv: Dict[str, Any] = _data(folder)["tool"]["uv"]
    return uv


# -- the settings ------------------------------------------------------------------------------

@pytest.mark.parametrize("channel_id", INSTALLABLE)
def test_each_channel_fragment_is_its_constraints_file_held_to_jetsons(channel_id: str) -> None:
    catalog = load_catalog()
    channel = catalog.channel(channel_id)
    data = tomllib.loads(fragment(uv_settings(catalog, channel)))
    uv = data["tool"]["uv"]
    group = f"jetson-{channel_id.replace('.', '-')}"
    assert uv["default-groups"] == [group]
    # constraint-dependencies are constraints/<channel>.txt's lines, each on Jetsons only.
    assert uv["constraint-dependencies"] == [f"{line} ; {BOARD_MARKER}" for line in channel_constraint_lines(catalog, channel)]
    listed = (TOP / "constraints" / f"{channel_id}.txt").read_text().splitlines()
    assert [line.split(" ; ")[0] for line in uv["constraint-dependencies"]] == [kept for kept in listed if not kept.startswith("#")]
    source = channel.primary
    assert source is not None
    # The group installs the preferred set (and the runtime wheels its builds need), on Jetsons.
    assert data["dependency-groups"][group] == [f"{line} ; {BOARD_MARKER}" for line in
                                                source.preferred.requirement_lines() + list(source.companions)]
    if source.default_index:
        assert "sources" not in uv and "index" not in uv  # uv's default index is never named
    elif source.wheels:
        assert uv["sources"]["torch"] == [{"url": source.wheels[0], "marker": BOARD_MARKER}]
    else:
        assert uv["index"] == [{"name": group, "url": source.index, "explicit": True}]
        assert set(uv["sources"]) == set(source.preferred.specifiers)
        assert all(entry == [{"index": group, "marker": BOARD_MARKER}] for entry in uv["sources"].values())


def _kernels() -> List[str]:
    found = sorted(TOP.glob("jetson_install/board/samples/*/proc/sys/kernel/osrelease"))
    found += sorted(TOP.glob("tests/resources/boards/*/proc/sys/kernel/osrelease"))
    return sorted({path.read_text().strip() for path in found})


@pytest.mark.parametrize("kernel", _kernels())
def test_the_marker_holds_on_every_captured_jetson_kernel(kernel: str) -> None:
    environment = {"sys_platform": "linux", "platform_machine": "aarch64", "platform_release": kernel}
    assert Marker(BOARD_MARKER).evaluate(environment)


def test_the_marker_does_not_hold_on_this_workstation() -> None:
    assert not Marker(BOARD_MARKER).evaluate()
    assert not on_a_jetson("'tegra' not in platform_release")
    assert on_a_jetson("sys_platform == 'linux'") and on_a_jetson(None)


# -- writing it -------------------------------------------------------------------------------

def test_export_writes_the_settings_and_a_rerun_changes_nothing(tmp_path: Path) -> None:
    folder = _project(tmp_path, MINIMAL + '\n[dependency-groups]\ndev = ["pytest"]  # the tests\n')
    first = run_cli("export", "--uv", "--channel", "jp6-cu126", str(folder))
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines()[0] == (f"{folder / 'pyproject.toml'}: jp6-cu126's uv settings written: "
                                            "JetPack 6.1-6.2.x (L4T R36.4-R36.5, CUDA 12.6)")
    assert "  [[tool.uv.index]] jetson-jp6-cu126: https://pypi.jetson-ai-lab.io/jp6/cu126/+simple/" in first.stdout
    assert "PEP 508 markers tell neither the L4T release nor Orin from Thor on R39" in first.stderr
    text = (folder / "pyproject.toml").read_text()
    assert text.startswith(MINIMAL + '\n[dependency-groups]\ndev = ["pytest"]  # the tests\n')
    uv = _uv(folder)
    assert uv["default-groups"] == ["dev", "jetson-jp6-cu126"]  # uv's own default, the dev group, is kept
    assert '"dev" too' in first.stdout
    again = run_cli("export", "--uv", "--channel", "jp6-cu126", str(folder))
    assert again.returncode == 0, again.stderr
    assert "holds jp6-cu126's uv settings already; nothing changed" in again.stdout
    assert (folder / "pyproject.toml").read_text() == text


def test_another_channel_replaces_the_first_and_leaves_nothing_of_it(tmp_path: Path) -> None:
    folder = _project(tmp_path)
    assert run_cli("export", "--uv", "--channel", "jp6-cu126", str(folder)).returncode == 0
    thor = run_cli("export", "--uv", "--channel", "jp7.2-thor", str(folder))
    assert thor.returncode == 0, thor.stderr
    assert "jp7.2-thor's uv settings written in place of jp6-cu126's" in thor.stdout
    assert "come from uv's default index at the pinned versions; uv.lock records each file's sha256" in thor.stdout
    data = _data(folder)
    assert set(data["dependency-groups"]) == {"jetson-jp7-2-thor"}
    assert "sources" not in data["tool"]["uv"] and "index" not in data["tool"]["uv"]
    assert "jp6" not in (folder / "pyproject.toml").read_text()
    # Back again: byte for byte what the first run wrote.
    run_cli("export", "--uv", "--channel", "jp6-cu126", str(folder))
    once = tmp_path / "once"
    once.mkdir()
    (once / "pyproject.toml").write_text(MINIMAL)
    run_cli("export", "--uv", "--channel", "jp6-cu126", str(once))
    assert (folder / "pyproject.toml").read_text() == (once / "pyproject.toml").read_text()


def test_print_shows_the_settings_and_changes_nothing(tmp_path: Path) -> None:
    folder = _project(tmp_path)
    result = run_cli("export", "--uv", "--channel", "jp7.2-orin", "--print", str(folder))
    assert result.returncode == 0, result.stderr
    assert result.stdout == fragment(uv_settings(load_catalog(), load_catalog().channel("jp7.2-orin")))
    assert "jp7.2-orin has no torchaudio or bitsandbytes build" in result.stderr
    assert (folder / "pyproject.toml").read_text() == MINIMAL


def test_the_channel_is_read_from_the_root(tmp_path: Path) -> None:
    folder = _project(tmp_path)
    result = run_cli("export", "--uv", "--root", "sample:agx-thor-jp7.0", str(folder))
    assert result.returncode == 0, result.stderr
    assert "jp7-thor-cu130's uv settings written" in result.stdout
    both = run_cli("export", "--uv", "--channel", "jp6-cu126", "--root", "sample:agx-thor-jp7.0", str(folder))
    assert both.returncode == 2 and "--channel and --root were both given" in both.stderr


def test_a_mirror_of_the_vendor_builds_is_the_index_written(tmp_path: Path) -> None:
    folder = _project(tmp_path)
    result = run_cli("export", "--uv", "--channel", "jp6-cu126", "--vendor-index", "https://mirror.example/jp6/",
                     str(folder))
    assert result.returncode == 0, result.stderr
    assert _uv(folder)["index"] == [{"name": "jetson-jp6-cu126", "url": "https://mirror.example/jp6/", "explicit": True}]
    insecure = run_cli("export", "--uv", "--channel", "jp6-cu126", "--vendor-index", "http://mirror.example/jp6/",
                       str(folder))
    assert insecure.returncode == 2 and "plain http to a remote host" in insecure.stderr


@pytest.mark.parametrize(("args", "code", "said"), [
    (["--channel", "jp5"], 3, "channel jp5 is unsupported: JetPack 5 ships Python 3.8"),
    (["--channel", "jp6-cu12"], 2, "no channel 'jp6-cu12'"),
    (["--root", str(TOP / "tests" / "resources" / "boards" / "debian-server-no-jetson")], 3, "no Jetson found"),
])
def test_a_channel_that_cannot_be_exported_is_refused(tmp_path: Path, args: List[str], code: int, said: str) -> None:
    folder = _project(tmp_path)
    result = run_cli("export", "--uv", *args, str(folder))
    assert result.returncode == code, result.stderr
    assert said in result.stderr and "fix:" in result.stderr
    assert (folder / "pyproject.toml").read_text() == MINIMAL


def test_without_uv_or_a_project_it_says_what_to_give(tmp_path: Path) -> None:
    no_kind = run_cli("export", "--channel", "jp6-cu126", str(tmp_path))
    assert no_kind.returncode == 2 and "--uv" in no_kind.stderr
    empty = run_cli("export", "--uv", "--channel", "jp6-cu126", str(tmp_path))
    assert empty.returncode == 2
    assert f"{tmp_path}: has no pyproject.toml" in empty.stderr and "--print" in empty.stderr


def test_crlf_and_the_file_mode_are_kept(tmp_path: Path) -> None:
    folder = _project(tmp_path, MINIMAL.replace("\n", "\r\n"))
    os.chmod(folder / "pyproject.toml", 0o640)
    assert run_cli("export", "--uv", "--channel", "jp6-cu126", str(folder)).returncode == 0
    raw = (folder / "pyproject.toml").read_bytes()
    assert raw.startswith(MINIMAL.replace("\n", "\r\n").encode()) and b"\n" not in raw.replace(b"\r\n", b"")
    assert stat.S_IMODE((folder / "pyproject.toml").stat().st_mode) == 0o640
    assert [p.name for p in folder.iterdir()] == ["pyproject.toml"]  # no temporary file left


# -- the project's own settings ----------------------------------------------------------------

REFUSED = [
    ("no marker on the project's torch source",
     MINIMAL + '\n[tool.uv.sources]\ntorch = { index = "cu" }\n\n[[tool.uv.index]]\nname = "cu"\nurl = "https://w.example/cu"\n'
               'explicit = true\n', 8, "takes torch from the index cu on Jetsons too",
     "keep it off Jetsons: marker = \"'tegra' not in platform_release\" on torch's source"),
    ("a Linux-wide marker",
     MINIMAL + '\n[tool.uv.sources]\ntorch = [\n  { index = "cu", marker = "sys_platform == \'linux\'" },\n]\n', 9,
     "takes torch from the index cu on Jetsons too",
     "keep it off Jetsons: marker = \"(sys_platform == 'linux') and 'tegra' not in platform_release\""),
    ("one source table kept off Jetsons",
     MINIMAL + '\n[tool.uv.sources]\ntorch = { index = "cu", marker = "platform_machine == \'x86_64\'" }\n', 8,
     "is one source table; jetson-install adds torch's Jetson source beside it in a list",
     "write it as a list: torch = [{ index = \"cu\", marker = \"platform_machine == 'x86_64'\" }]"),
    ("a torch range without the channel's",
     MINIMAL.replace('["torch>=2.0"]', '[\n    "numpy",\n    "torch>=2.9",\n]'), 7,
     "torch>=2.9 leaves out jp6-cu126's torch 2.8.0", 'allow 2.8.0 on Jetsons, e.g. "torch>=2.8.0"'),
    ("an override of torch",
     MINIMAL + '\n[tool.uv]\noverride-dependencies = ["torch==2.9.0"]\n', 8,
     "torch==2.9.0 replaces jp6-cu126's torch 2.8.0 on Jetsons", "'tegra' not in platform_release"),
    ("environments without Jetsons",
     MINIMAL + '\n[tool.uv]\nenvironments = ["sys_platform == \'darwin\'"]\n', 8,
     "environments leaves out Jetsons", f"add \"{BOARD_MARKER}\" to environments"),
    ("an index of jetson-install's name",
     MINIMAL + '\n[[tool.uv.index]]\nname = "jetson-jp6-cu126"\nurl = "https://w.example/simple"\n', 7,
     "the index jetson-jp6-cu126 is the project's own", "rename the project's index jetson-jp6-cu126"),
    ("no-sources",
     MINIMAL + '\n[tool.uv]\nno-sources = true\n', 8, "makes uv ignore [tool.uv.sources]", "remove no-sources"),
    ("tool.uv as an inline table",
     MINIMAL + '\n[tool]\nuv = { package = false }\n', 8, "tool.uv is written as one value (an inline table)",
     "rewrite it as a table"),
]


@pytest.mark.parametrize(("case", "text", "line", "what", "fix"), REFUSED, ids=[case[0] for case in REFUSED])
def test_settings_of_the_project_that_contradict_the_channel_are_refused_by_line(
        tmp_path: Path, case: str, text: str, line: int, what: str, fix: str) -> None:
    folder = _project(tmp_path, text)
    result = run_cli("export", "--uv", "--channel", "jp6-cu126", str(folder))
    assert result.returncode == 2, result.stdout
    assert f"error: {folder / 'pyproject.toml'}:{line}: " in result.stderr and what in result.stderr, result.stderr
    assert "fix: " in result.stderr and fix in result.stderr, result.stderr
    assert (folder / "pyproject.toml").read_text() == text


def test_a_non_explicit_index_is_refused_where_torch_comes_from_the_default_index(tmp_path: Path) -> None:
    text = MINIMAL + '\n[[tool.uv.index]]\nname = "internal"\nurl = "https://w.example/simple"\n'
    folder = _project(tmp_path, text)
    result = run_cli("export", "--uv", "--channel", "jp7.2-thor", str(folder))
    assert result.returncode == 2
    assert f"{folder / 'pyproject.toml'}:7: the index internal is searched before the default index" in result.stderr
    assert "add explicit = true to it" in result.stderr
    assert run_cli("export", "--uv", "--channel", "jp6-cu126", str(folder)).returncode == 0  # sources pin torch there


def test_a_workspace_member_is_sent_to_the_workspace_root(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.uv.workspace]\nmembers = ["packages/*"]\n')
    member = tmp_path / "packages" / "model"
    member.mkdir(parents=True)
    (member / "pyproject.toml").write_text(MINIMAL)
    result = run_cli("export", "--uv", "--channel", "jp6-cu126", str(member))
    assert result.returncode == 2
    assert "is a member of the uv workspace" in result.stderr and f"fix: jetson-install export --uv {tmp_path}" in result.stderr


# -- real projects' shapes -------------------------------------------------------------------------

SHAPE_FILES = sorted(SHAPES.glob("*.toml")) + [TOP / "pyproject.toml",
                                               TOP / "tests" / "resources" / "bitsandbytes-standin" / "pyproject.toml"]


def _without_marked_lines(text: str) -> List[str]:
    """The lines of `text` outside jetson-install's marks."""
    kept, inside = [], False
    for line in text.replace("\r\n", "\n").splitlines():
        if line.strip().startswith("# >>> jetson-install export --uv"):
            inside = True
        elif line.strip() == "# <<< jetson-install export --uv <<<":
            inside = False
        elif not inside:
            kept.append(line)
    return kept


def _subsequence(small: List[str], big: List[str]) -> bool:
    found = iter(big)
    return all(any(line == other for other in found) for line in small)


@pytest.mark.parametrize("path", SHAPE_FILES, ids=[p.name if p.parent == SHAPES else str(p.relative_to(TOP)) for p in SHAPE_FILES])
def test_real_project_shapes_keep_everything_of_their_own(tmp_path: Path, path: Path) -> None:
    if path.name == "pytorch-index.toml":
        pytest.skip("refused: its one torch source table holds on Jetsons too (test_a_whole_pytorch_project_is_refused)")
    original = path.read_bytes()
    folder = _project(tmp_path, original.decode())
    before = tomllib.loads(original.decode())
    for channel in ("jp6-cu126", "jp7.2-thor", "jp6-cu126"):
        result = run_cli("export", "--uv", "--channel", channel, str(folder))
        assert result.returncode == 0, result.stderr
        after = (folder / "pyproject.toml").read_bytes().decode()
        assert (b"\r\n" in original) == ("\r\n" in after)
        # Every line of the project's own is there, in its order (an array that was one line may
        # have gained a comma and its `]` a line of its own).
        own = [line for line in original.decode().replace("\r\n", "\n").splitlines() if not line.rstrip().endswith("]")]
        assert _subsequence(own, _without_marked_lines(after)), after
        data = tomllib.loads(after)
        assert data["project"] == before["project"]
        for key, value in before.get("tool", {}).items():
            if key != "uv":
                assert data["tool"][key] == value
        for key, value in before.get("tool", {}).get("uv", {}).items():
            if key not in ("default-groups", "constraint-dependencies", "index", "sources"):
                assert data["tool"]["uv"][key] == value
        for name, group in before.get("dependency-groups", {}).items():
            assert data["dependency-groups"][name] == group
        for key in ("default-groups", "constraint-dependencies", "index"):
            own_items = before.get("tool", {}).get("uv", {}).get(key, [])
            assert data["tool"]["uv"][key][:len(own_items)] == own_items if own_items else True
    twice = (folder / "pyproject.toml").read_text()
    assert run_cli("export", "--uv", "--channel", "jp6-cu126", str(folder)).returncode == 0
    assert (folder / "pyproject.toml").read_text() == twice


def test_a_whole_pytorch_project_is_refused_with_the_line_of_its_torch_source(tmp_path: Path) -> None:
    folder = _project(tmp_path, (SHAPES / "pytorch-index.toml").read_text())
    result = run_cli("export", "--uv", "--channel", "jp6-cu126", str(folder))
    assert result.returncode == 2
    assert f"{folder / 'pyproject.toml'}:17: takes torch from the index pytorch-cu124 on Jetsons too" in result.stderr


def test_marker_split_sources_get_the_jetson_entry_beside_their_own(tmp_path: Path) -> None:
    folder = _project(tmp_path, (SHAPES / "marker-split.toml").read_text())
    assert run_cli("export", "--uv", "--channel", "jp6-cu126", str(folder)).returncode == 0
    torch = _uv(folder)["sources"]["torch"]
    assert torch[:2] == tomllib.loads((SHAPES / "marker-split.toml").read_text())["tool"]["uv"]["sources"]["torch"]
    assert torch[2] == {"index": "jetson-jp6-cu126", "marker": BOARD_MARKER}
    assert [index["name"] for index in _uv(folder)["index"]] == ["pytorch-cpu", "pytorch-cu130", "jetson-jp6-cu126"]


def test_inline_indexes_and_dotted_sources_are_extended_in_place(tmp_path: Path) -> None:
    folder = _project(tmp_path, (SHAPES / "groups-and-inline-index.toml").read_text())
    assert run_cli("export", "--uv", "--channel", "jp6-cu126", str(folder)).returncode == 0
    uv = _uv(folder)
    assert uv["default-groups"] == ["dev", "test", "jetson-jp6-cu126"]
    assert uv["constraint-dependencies"][0] == "grpcio<1.65"
    assert [index["name"] for index in uv["index"]] == ["internal", "jetson-jp6-cu126"]
    assert uv["sources"]["fastapi"] == {"index": "internal"}
    assert "[[tool.uv.index]]" not in (folder / "pyproject.toml").read_text()
    assert "sources.torch = [" in (folder / "pyproject.toml").read_text()


def test_requirements_in_the_group_parse_and_name_the_stack() -> None:
    catalog = load_catalog()
    settings = uv_settings(catalog, catalog.channel("jp6-cu126"))
    names = [Requirement(line).name for line in settings.requirements]
    assert names == ["torch", "torchvision", "torchaudio", "bitsandbytes"]
    assert all(str(Requirement(line).marker) == str(Marker(BOARD_MARKER))
               for line in settings.requirements + settings.constraints)


def test_the_maintainers_page_holds_each_channels_settings_as_the_command_prints_them() -> None:
    catalog = load_catalog()
    text = (TOP / "docs" / "uv-projects.md").read_text()
    section = text.split("<!-- uv-fragments:start -->\n", 1)[1].split("<!-- uv-fragments:end -->", 1)[0]
    expected = "\n".join(f"### `{channel_id}`\n\n```toml\n{fragment(uv_settings(catalog, catalog.channel(channel_id)))}```\n"
                         for channel_id in INSTALLABLE)
    assert section == expected, ("regenerate docs/uv-projects.md's section: each installable channel's "
                                 "`jetson-install export --uv --channel ID --print`, under ### `ID`, fenced ```toml")
