"""Credentials in index and source URLs: masked in everything shown or written, and kept
off every command line (uv's, git's, and the git that uv runs), while uv and git still
authenticate with them."""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Sequence, Tuple

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from support import OBLITERATUS_TAG, isolated_env
from support.catalogs import stub_catalog_text
from support.cli import run_cli
from support.git_server import GitServer, bare_repository, logging_wrappers

from jetson_install.base.redact import json_text, redact, redact_data
from jetson_install.base import git_urls
from jetson_install.tools import runner, uv
from support.index_server import LoopbackIndex
from support.stub_projects import IndexDirs

TOP = Path(__file__).resolve().parent.parent
SECRET = "s3cr3t-pw"
TOKEN = "ghp_tok3n"
SAMPLE = "sample:agx-orin-64gb-jp6.2"


@pytest.mark.parametrize(("text", "shown"), [
    ("https://alice:s3cr3t@mirror.example/simple", "https://alice:****@mirror.example/simple"),
    ("git+https://ghp_tok3n@git.example/o/r.git@v1", "git+https://****@git.example/o/r.git@v1"),
    ("https://ghp_tok3n:@mirror.example/simple", "https://****@mirror.example/simple"),
    ("fix: run --vendor-index https://a:p%40ss@h/simple --json", "fix: run --vendor-index https://a:****@h/simple --json"),
    ("https://user:a@b@host/x", "https://user:****@host/x"),
    ("git+ssh://git@git.example/o/r.git", "git+ssh://git@git.example/o/r.git"),
    ("https://h/x?a=b@c and mail@example.org", "https://h/x?a=**** and mail@example.org"),
    ("--vendor-index https://mirror.example/jp6/+simple/?token=SEKRET456 --json",
     "--vendor-index https://mirror.example/jp6/+simple/?token=**** --json"),
    ('see "https://h/x?a=1&key=2#frag" (or https://h/?k) - why?', 'see "https://h/x?a=****&key=****#frag" (or https://h/?****) - why?'),
])
def test_redact_masks_the_secret_and_keeps_the_rest(text: str, shown: str) -> None:
    assert redact(text) == shown
    assert redact(shown) == shown


def test_redact_data_reaches_nested_strings() -> None:
    data = {"steps": [{"argv": ["uv", "--default-index", f"https://a:{SECRET}@h/simple"]}], "n": 1}
    assert SECRET not in json.dumps(redact_data(data))


# Properties of redaction, over any credentials a URL can carry. The secret holds a character
# (¤) nothing else in these texts has, so "not shown" is a plain search for it.
REDACTION = settings(max_examples=80, deadline=None)
MARK = "¤"
# A URL's userinfo ends at whitespace, '/', '?' or '#'; a user name ends at its first ':' and
# '@'. Hosts, paths and text around exclude '@' and MARK, and '?' (a query is drawn apart: its
# values are masked too).
secrets = st.builds("{}{}{}".format, st.text(st.characters(codec="utf-8", exclude_categories=("Z", "Cc"),
                                                           exclude_characters="/?#"), max_size=12),
                    st.just(MARK), st.text(st.characters(codec="utf-8", exclude_categories=("Z", "Cc"),
                                                         exclude_characters="/?#"), max_size=12))
users = st.text(st.characters(codec="utf-8", exclude_categories=("Z", "Cc"), exclude_characters=f"/?#@:{MARK}"),
                max_size=12)
schemes = st.sampled_from(["https", "http", "git+https", "file", "HTTPS", "s3"])
hosts = st.sampled_from(["mirror.example", "192.0.2.1:8080", "[::1]", "git.example"])
paths = st.text(st.characters(codec="utf-8", exclude_categories=("Z", "Cc"), exclude_characters=f"@?#{MARK}"), max_size=20)
plain = st.text(st.characters(codec="utf-8", exclude_characters=f"@?{MARK}"), max_size=30)


@st.composite
def credentialed_urls(draw: st.DrawFn) -> Tuple[str, str]:
    """A URL with a password or a token, and the URL as shown: the secret as ****."""
    scheme, host, path = draw(schemes), draw(hosts), "/" + draw(paths)
    if draw(st.booleans()):
        user = draw(users)
        return f"{scheme}://{user}:{draw(secrets)}@{host}{path}", f"{scheme}://{user}:****@{host}{path}"
    # A token: a user name alone, or with an empty password (TOKEN:@host).
    token = draw(secrets.filter(lambda secret: ":" not in secret)) + draw(st.sampled_from(["", ":"]))
    return f"{scheme}://{token}@{host}{path}", f"{scheme}://****@{host}{path}"


@REDACTION
@given(credentialed_urls())
def test_a_urls_password_or_token_is_shown_as_stars_and_the_rest_as_it_is(url: Tuple[str, str]) -> None:
    event(f"scheme {url[0].split(':', 1)[0]}")
    given_url, shown = url
    assert redact(given_url) == shown


@REDACTION
@given(plain, credentialed_urls(), plain)
def test_a_secret_in_free_text_is_never_shown_and_the_text_around_it_is_kept(before: str, url: Tuple[str, str],
                                                                             after: str) -> None:
    event(f"text around it: {bool(before.strip() or after.strip())}")
    assert redact(f"{before} {url[0]} {after}") == f"{before} {url[1]} {after}"


# A query's names (no '=', '&', MARK) and values (anything a URL's query holds, MARK among it).
query_names = st.text(st.characters(codec="utf-8", exclude_categories=("Z", "Cc"),
                                    exclude_characters=f"=&#?\"'`<>()[]{MARK}"), min_size=1, max_size=8)
query_values = st.builds("{}{}{}".format, *(st.text(st.characters(codec="utf-8", exclude_categories=("Z", "Cc"),
                                                                   exclude_characters=f"=&#\"'`<>()[]{MARK}"), max_size=6),
                                            st.just(MARK),
                                            st.text(st.characters(codec="utf-8", exclude_categories=("Z", "Cc"),
                                                                  exclude_characters=f"=&#\"'`<>()[]{MARK}"), max_size=6)))


@REDACTION
@given(schemes, hosts, paths, st.lists(st.tuples(query_names, query_values), min_size=1, max_size=3), plain)
def test_every_value_of_a_urls_query_is_shown_as_stars_and_its_names_as_they_are(
        scheme: str, host: str, path: str, query: List[Tuple[str, str]], after: str) -> None:
    """A token in an index URL's query (`?token=...`): which names hold a secret is the server's to say."""
    event(f"query fields: {len(query)}")
    url = f"{scheme}://{host}/{path}?" + "&".join(f"{name}={value}" for name, value in query)
    shown = redact(f"{url} {after}")
    assert MARK not in shown
    assert shown == f"{scheme}://{host}/{path}?" + "&".join(f"{name}=****" for name, _ in query) + f" {after}"


def strings_in(data: Any) -> List[str]:
    if isinstance(data, str):
        return [data]
    if isinstance(data, dict):
        return [text for key, value in data.items() for text in strings_in(key) + strings_in(value)]
    if isinstance(data, (list, tuple)):
        return [text for item in data for text in strings_in(item)]
    return []


json_data = st.recursive(
    st.none() | st.booleans() | st.integers() | plain | credentialed_urls().map(lambda url: url[0])
    | st.builds("{} {}".format, plain, credentialed_urls().map(lambda url: url[0])),
    lambda inner: st.lists(inner, max_size=3) | st.lists(inner, max_size=3).map(tuple)
    | st.dictionaries(plain | credentialed_urls().map(lambda url: url[0]), inner, max_size=3),
    max_leaves=12)


@REDACTION
@given(json_data)
def test_no_secret_survives_anywhere_in_nested_data(data: Any) -> None:
    event(f"the secret is in the data: {any(MARK in text for text in strings_in(data))}")
    assert not any(MARK in text for text in strings_in(redact_data(data)))
    assert MARK not in json_text(data)


# Texts made of the pieces of URLs, so that schemes, userinfo and '@' meet in every order.
url_soup = st.lists(st.sampled_from(["https://", "git+ssh://", "a", "b:", ":", "@", "/", "****", " ", "?", "#", "%40",
                                     "user", "host.example"]), max_size=30).map("".join)


@REDACTION
@given(url_soup | st.text(max_size=60))
def test_redacting_twice_shows_what_redacting_once_shows(text: str) -> None:
    event(f"redacted: {redact(text) != text}")
    assert redact(redact(text)) == redact(text)


@REDACTION
@given(st.text(max_size=60).filter(lambda text: "://" not in text))
def test_text_without_a_urls_credentials_is_shown_unchanged(text: str) -> None:
    event(f"holds an @: {'@' in text}")
    # A mail address, git@host:owner/repo, a version's '@': none is a URL's userinfo.
    assert redact(text) == text
    assert redact_data({text: [text, (text,)]}) == {text: [text, [text]]}


def test_uv_gets_credentials_from_its_environment_not_its_command_line() -> None:
    argv = uv.target_install_argv("/py", ["torch==2.8.0"], "/c.txt", f"https://alice:{SECRET}@mirror.example/simple")
    assert SECRET not in " ".join(argv) and "alice" not in " ".join(argv)
    assert "private=https://mirror.example/simple" in argv
    index = f"https://alice:{SECRET}@mirror.example/simple"
    variables, removed = uv.environment_for([index], argv)
    assert variables["UV_INDEX_PRIVATE_USERNAME"] == "alice" and variables["UV_INDEX_PRIVATE_PASSWORD"] == SECRET
    assert "UV_INDEX_PRIVATE_PASSWORD" in removed  # never the caller's own
    plain = uv.environment_for(["https://mirror.example/simple"], uv.target_install_argv("/py", [], "/c.txt", "https://mirror.example/simple"))[0]
    assert "UV_INDEX_PRIVATE_USERNAME" not in plain


def run_process(args: Sequence[str], env: Dict[str, str]) -> subprocess.CompletedProcess[str]:
    """In a process of its own: what reaches the real stdout, stderr and log file is masked."""
    return subprocess.run([sys.executable, "-m", "jetson_install", *args], capture_output=True, text=True,
                          env=env, timeout=120)


@pytest.mark.parametrize("command", [["plan", "obliteratus"], ["plan", "obliteratus", "--json"],
                                     ["obliteratus", "--dry-run"], ["obliteratus", "--dry-run", "--json"]])
def test_plan_and_dry_run_show_no_secret(command: List[str], tmp_path: Path) -> None:
    env = isolated_env(tmp_path)
    env["JETSON_INSTALL_DEFAULT_INDEX"] = f"https://bob:{SECRET}@mirror.example/pypi/simple"
    config = tmp_path / "config.toml"
    config.write_text(f'vendor_index = "https://carol:{SECRET}@mirror.example/jp6/cu126"\n')
    env["JETSON_INSTALL_CONFIG"] = str(config)
    result = run_cli(*command, "--root", SAMPLE, "--venv", str(tmp_path / "v"),
                     "--source", f"https://{TOKEN}@git.example/o/OBLITERATUS.git", env=env)
    assert result.returncode == 0, result.stderr
    assert SECRET not in result.stdout + result.stderr and TOKEN not in result.stdout + result.stderr
    assert "bob:****@mirror.example" in result.stdout and "carol:****@mirror.example" in result.stdout
    assert "https://****@git.example/o/OBLITERATUS.git" in result.stdout


def test_bad_index_error_and_its_fix_show_no_secret(tmp_path: Path) -> None:
    result = run_cli("plan", "obliteratus", "--root", SAMPLE, "--json",
                     "--vendor-index", f"http://alice:{SECRET}@192.0.2.1/simple", env=isolated_env(tmp_path))
    assert result.returncode == 2
    assert SECRET not in result.stdout + result.stderr
    assert "alice:****@192.0.2.1" in result.stderr


@pytest.mark.slow
def test_install_authenticates_yet_nothing_written_or_shown_holds_the_secret(
        tmp_path: Path, stub_index_dirs: IndexDirs, start_index: Callable[..., LoopbackIndex], obliteratus_source: Path) -> None:
    vendor = start_index(stub_index_dirs.vendor, name="vendor", credentials=f"alice:{SECRET}")
    public = start_index(stub_index_dirs.public, name="public", credentials=f"{TOKEN}:")
    env = isolated_env(tmp_path, fast_fail=True)
    from support.catalogs import stub_catalog_text

    catalog = tmp_path / "wheels-index.toml"
    catalog.write_text(stub_catalog_text((TOP / "wheels-index.toml").read_text(), stub_index_dirs.vendor))
    env["JETSON_INSTALL_WHEELS_INDEX"] = str(catalog)
    venv = tmp_path / "obl"
    result = run_process(["obliteratus", "--root", SAMPLE, "--venv", str(venv), "--python", sys.executable,
                      "--vendor-index", vendor.url.replace("http://", f"http://alice:{SECRET}@"),
                      "--default-index", public.url.replace("http://", f"http://{TOKEN}@"),
                      "--source", str(obliteratus_source), "--no-verify", "--yes", "--json"], env)
    assert result.returncode == 0, result.stderr
    assert SECRET not in result.stdout + result.stderr and TOKEN not in result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert "alice:****@127.0.0.1" in data["vendor_index"]
    log = Path(data["log"])
    assert log.read_text().count("run: ") >= 3 and SECRET not in log.read_text() and TOKEN not in log.read_text()
    assert stat.S_IMODE(log.stat().st_mode) == 0o600 and stat.S_IMODE(log.parent.stat().st_mode) == 0o700
    plan_json = Path(data["environment"]) / "jetson-install" / "plan.json"
    assert SECRET not in plan_json.read_text() and stat.S_IMODE(plan_json.stat().st_mode) == 0o600
    # The command it was made with (the record's repair command, plan.json's for `add`) is kept masked.
    record = (Path(data["environment"]) / "jetson-install" / "vendor.json").read_text()
    assert SECRET not in record and TOKEN not in record and "alice:****@127.0.0.1" in record
    assert "alice:****@127.0.0.1" in " ".join(json.loads(plan_json.read_text())["command"])
    # Unchanged on a re-run: the redacted record still matches the plan.
    again = run_process(["obliteratus", "--root", SAMPLE, "--venv", str(venv), "--python", sys.executable,
                     "--vendor-index", vendor.url.replace("http://", f"http://alice:{SECRET}@"),
                     "--default-index", public.url.replace("http://", f"http://{TOKEN}@"),
                     "--source", str(obliteratus_source), "--no-verify", "--yes", "--json"], env)
    assert json.loads(again.stdout)["status"] == "unchanged", again.stderr


# -- no secret on any command line: git and uv log every command line they are given ---------------

GIT_TOKEN = "glpat-g1t-t0ken"


@pytest.fixture
def commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The file where every git and uv command line of the test is logged: git through PATH
    (put first by `logged_env`; uv runs the git it finds there), uv through the one function
    that finds its binary."""
    log = tmp_path / "commands.log"
    git = shutil.which("git")
    assert git is not None
    wrappers = logging_wrappers(tmp_path / "logging-bin", log, {"git": git, "uv": runner.uv_binary()})
    monkeypatch.setattr(runner, "uv_binary", lambda: str(wrappers["uv"]))
    return log


def logged_env(tmp_path: Path, vendor_dir: Path) -> Dict[str, str]:
    env = isolated_env(tmp_path, fast_fail=True)
    env["PATH"] = f"{tmp_path / 'logging-bin'}:{env['PATH']}"
    catalog = tmp_path / "wheels-index.toml"
    catalog.write_text(stub_catalog_text((TOP / "wheels-index.toml").read_text(), vendor_dir))
    env["JETSON_INSTALL_WHEELS_INDEX"] = str(catalog)
    return env


@pytest.fixture
def served(obliteratus_git_repo: Path, tmp_path: Path) -> Iterator[GitServer]:
    """The stub OBLITERATUS repository over http, answering only GIT_TOKEN (as a lone token)."""
    folder = tmp_path / "served"
    folder.mkdir()
    bare_repository(obliteratus_git_repo, folder / "OBLITERATUS.git")
    with GitServer(folder, {"OBLITERATUS.git": (GIT_TOKEN,)}) as server:
        yield server


def assert_no_secret_in(log: Path, *secrets: str) -> str:
    text = log.read_text()
    assert text.count("\n") >= 3, text
    for secret in secrets:
        assert secret not in text, next(line for line in text.splitlines() if secret in line)
    return text


@pytest.mark.slow
@pytest.mark.parametrize(("target", "option", "source"), [
    ("obliteratus", "--source", "{url}"),
    ("torch", "--with", "git+{url}@" + OBLITERATUS_TAG),
], ids=["source", "with"])
def test_a_git_token_index_credentials_reach_their_servers_and_no_command_line(
        target: str, option: str, source: str, tmp_path: Path, commands: Path, served: GitServer,
        stub_index_dirs: IndexDirs, start_index: Callable[..., LoopbackIndex]) -> None:
    vendor = start_index(stub_index_dirs.vendor, name="vendor", credentials=f"alice:{SECRET}")
    public = start_index(stub_index_dirs.public, name="public", credentials=f"{TOKEN}:")
    ref = ["--ref", OBLITERATUS_TAG] if option == "--source" else []
    result = run_cli(target, "--root", SAMPLE, "--venv", str(tmp_path / "v"), "--python", sys.executable,
                     "--vendor-index", vendor.url.replace("http://", f"http://alice:{SECRET}@"),
                     "--default-index", public.url.replace("http://", f"http://{TOKEN}@"),
                     option, source.format(url=served.url("OBLITERATUS.git", GIT_TOKEN)), *ref,
                     "--no-verify", "--yes", "--json", env=logged_env(tmp_path, stub_index_dirs.vendor))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["installed"]["obliteratus"] == "0.1.3"
    text = assert_no_secret_in(commands, GIT_TOKEN, SECRET, TOKEN)
    # uv's own git fetched the repository by its bare URL, and the token reached the server.
    assert f"git fetch --force --update-head-ok {served.url('OBLITERATUS.git')} " in text
    assert any(allowed for _, allowed in served.seen)
    assert "uv pip install" in text and "private=" + public.url in text
    # The vendor files came through the tool's own downloads, with the vendor index's credentials
    # (the server refuses a request without them), never on a command line.
    assert vendor.downloaded_files() and vendor.url not in text


@pytest.mark.slow
def test_lock_wheelhouse_and_an_install_from_it_put_no_secret_on_a_command_line(
        tmp_path: Path, commands: Path, served: GitServer, stub_index_dirs: IndexDirs, start_index: Callable[..., LoopbackIndex], board_here: Path) -> None:
    credentials = f"alice:{SECRET}"
    vendor = start_index(stub_index_dirs.vendor, name="vendor", credentials=credentials)
    public = start_index(stub_index_dirs.public, name="public", credentials=credentials)
    env = logged_env(tmp_path, stub_index_dirs.vendor)
    # The lock and the wheelhouse fetch the vendor files by their URLs, which carry none (docs/fleets.md).
    netrc = Path(env["HOME"]) / ".netrc"
    netrc.write_text(f"machine 127.0.0.1 login alice password {SECRET}\n")
    netrc.chmod(0o600)
    lock = tmp_path / "made" / "obliteratus.lock"
    # A board of this machine's architecture: `lock --python` takes the board's own interpreter.
    made = run_cli("lock", "--root", str(board_here), "--python", sys.executable,
                   "--vendor-index", vendor.url.replace("http://", f"http://{credentials}@"),
                   "--default-index", public.url.replace("http://", f"http://{credentials}@"),
                   "--source", served.url("OBLITERATUS.git", GIT_TOKEN), "--ref", OBLITERATUS_TAG,
                   "--output", str(lock), env=env)
    assert made.returncode == 0, made.stderr
    # A git URL given with --with is refused before anything runs (a lock holds only files an
    # index lists), its token in no line; an install's --with git URL reaches uv's git (above).
    refused = run_cli("lock", "torch", "--root", str(board_here), "--python", sys.executable, "--vendor-index",
                      vendor.url, "--default-index", public.url, "--with",
                      f"git+{served.url('OBLITERATUS.git', GIT_TOKEN)}@{OBLITERATUS_TAG}",
                      "--output", str(tmp_path / "torch.lock"), env=env)
    assert refused.returncode == 2 and refused.stderr.startswith("error: --with git+"), refused.stderr
    assert GIT_TOKEN not in refused.stderr + refused.stdout and not (tmp_path / "torch.lock").exists()
    house = tmp_path / "wheelhouse" / "house"
    filled = run_cli("wheelhouse", str(house), "--lock", str(lock), env=env)
    assert filled.returncode == 0, filled.stderr
    netrc.unlink()  # the install from the served wheelhouse has the credentials of its URL alone
    with GitServer(house.parent, {"house": (credentials,)}) as mirror:
        installed = run_cli("obliteratus", "--root", SAMPLE, "--venv", str(tmp_path / "v"), "--python", sys.executable,
                            "--lock", str(lock), "--wheelhouse", mirror.url("house", credentials),
                            "--no-verify", "--yes", "--json", env=env)
        assert installed.returncode == 0, installed.stderr
        assert any(allowed for _, allowed in mirror.seen)
    text = assert_no_secret_in(commands, GIT_TOKEN, SECRET)
    assert f"git clone --quiet -- {served.url('OBLITERATUS.git')} " in text  # the lock's own clone
    assert "uv pip compile" in text and "uv pip install" in text


def test_git_gets_each_repository_its_own_credentials_after_the_callers_own_settings(
        obliteratus_git_repo: Path, tmp_path: Path) -> None:
    """Two repositories on one host with different tokens (a project's deploy tokens): each
    helper is scoped to its repository; one token for the host is scoped to the host, as uv's
    `insteadOf` was, so a submodule there gets it too."""
    folder = tmp_path / "served"
    folder.mkdir()
    for name in ("a.git", "b.git"):
        bare_repository(obliteratus_git_repo, folder / name)
    with GitServer(folder, {"a.git": ("user:token-a",), "b.git": ("token-b",)}) as server:
        urls = [f"git+{server.url('a.git', 'user:token-a')}@v1", server.url("b.git", "token-b")]
        inherited = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "core.askPass", "GIT_CONFIG_VALUE_0": ""}
        env = git_urls.credential_environment(urls, inherited)
        assert env["GIT_CONFIG_KEY_1"] == f"credential.{server.url('a.git')}.helper"  # after the caller's one
        assert "token" not in " ".join(value for key, value in env.items() if key.startswith("GIT_CONFIG"))
        for name in ("a.git", "b.git"):
            listed = subprocess.run(["git", "ls-remote", server.url(name), OBLITERATUS_TAG], capture_output=True,
                                    text=True, env=isolated_env(tmp_path, {**inherited, **env}), timeout=60)
            assert listed.returncode == 0 and "refs/tags/" in listed.stdout, listed.stderr
        one = git_urls.credential_environment([server.url("a.git", "t"), server.url("b.git", "t")], {})
        assert one["GIT_CONFIG_KEY_0"] == f"credential.{server.url('')[:-1]}.helper" and one["GIT_CONFIG_COUNT"] == "2"
    assert git_urls.credential_environment(["git+ssh://git@host/o/r.git", "git+https://host/o/r.git"], {}) == {}


@pytest.mark.parametrize(("line", "given"), [
    (f"obliteratus @ git+https://user:{GIT_TOKEN}@git.example/o/r.git@v1", "obliteratus @ git+https://git.example/o/r.git@v1"),
    (f"git+http://{GIT_TOKEN}@127.0.0.1:8/r.git", "git+http://127.0.0.1:8/r.git"),
    ("git+ssh://git@git.example/o/r.git@v1", "git+ssh://git@git.example/o/r.git@v1"),
    # An archive: uv fetches it itself, with its credentials (in a file only the user reads).
    (f"obliteratus @ https://{GIT_TOKEN}@files.example/o.tar.gz", f"obliteratus @ https://{GIT_TOKEN}@files.example/o.tar.gz"),
    ("transformers>=4.40", "transformers>=4.40"),
])
def test_uv_gets_a_git_requirement_without_its_credentials(line: str, given: str) -> None:
    assert git_urls.requirement_without_credentials(line) == given
    assert git_urls.without_credentials(f"https://{GIT_TOKEN}@git.example/r.git") == "https://git.example/r.git"


def test_the_additions_probe_gets_no_credentials_of_any_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--with http://alice:PW@host/.../pkg.whl`: `ps` showed the password on the additions probe's
    command line at the install's check step and at every doctor run; the probe fetches nothing."""
    from support.doctor_env import make_env

    from jetson_install.base.layout import ADDED_FILE, STATE_DIR
    from jetson_install.probes import additions_command

    added = [f"http://alice:{SECRET}@127.0.0.1:9/files/pkg-1.0-py3-none-any.whl",
             f"mine @ https://{TOKEN}@mirror.example/files/mine-2.0.tar.gz",
             f"git+https://{TOKEN}@git.example/owner/repo@v1"]
    assert additions_command("/env/bin/python", added)[2:] == (
        "http://127.0.0.1:9/files/pkg-1.0-py3-none-any.whl", "mine @ https://mirror.example/files/mine-2.0.tar.gz",
        "git+https://git.example/owner/repo@v1")
    # The doctor on an environment that recorded them: every command line it starts.
    make_env(tmp_path / "env")
    (tmp_path / "env" / STATE_DIR).mkdir(exist_ok=True)
    (tmp_path / "env" / STATE_DIR / ADDED_FILE).write_text("".join(f"{line}\n" for line in added))
    started: List[List[str]] = []
    real = subprocess.Popen

    def recording(args: Any, *rest: Any, **options: Any) -> Any:
        started.append([str(word) for word in args])
        return real(args, *rest, **options)

    monkeypatch.setattr(subprocess, "Popen", recording)
    result = run_cli("doctor", "--root", SAMPLE, "--venv", str(tmp_path / "env"), "--check", "additions",
                     env=isolated_env(tmp_path))
    probes = [argv for argv in started if any(word.endswith("additions_probe.py") for word in argv)]
    assert probes, (result.stdout, result.stderr, started)
    assert not [argv for argv in started if SECRET in " ".join(argv) or TOKEN in " ".join(argv)]


@pytest.mark.slow
@pytest.mark.parametrize("given", ["--mirror", "configuration"])
def test_a_mirror_with_credentials_serves_a_dead_vendor_indexs_builds_and_no_command_line_holds_them(
        given: str, tmp_path: Path, commands: Path, stub_index_dirs: IndexDirs, obliteratus_source: Path,
        start_index: Callable[..., LoopbackIndex]) -> None:
    """The set was read from an authenticated mirror, then every download was refused (HTTP 401)
    with a fix saying to put the credentials in the URL they were already in; and the vendor
    step named the source passed over."""
    mirror = start_index(stub_index_dirs.vendor, name="mirror", credentials=f"alice:{SECRET}")
    public = start_index(stub_index_dirs.public, name="public")
    env = logged_env(tmp_path, stub_index_dirs.vendor)
    with_secret = mirror.url.replace("http://", f"http://alice:{SECRET}@")
    extra: List[str] = []
    if given == "--mirror":
        extra = ["--mirror", with_secret]
    else:
        (tmp_path / "config.toml").write_text(f'mirrors = ["{with_secret}"]\n')
        env["JETSON_INSTALL_CONFIG"] = str(tmp_path / "config.toml")
    dead = "http://127.0.0.1:9/simple"  # the discard port: nothing listens there
    result = run_cli("obliteratus", "--root", SAMPLE, "--venv", str(tmp_path / "obl"), "--python", sys.executable,
                     "--vendor-index", dead, "--default-index", public.url, *extra, "--source", str(obliteratus_source),
                     "--no-verify", "--yes", "--json", env=env)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["resolution"]["source"] == mirror.url
    assert sorted(mirror.downloaded_files()) == sorted(file["file"] for file in data["resolution"]["files"])
    vendor_step = next(step for step in data["plan_steps"] if step["id"] == "vendor")
    assert vendor_step["title"].startswith(f"install the vendor builds from {data['resolution']['source']}, ")
    assert f"vendor source {dead} passed over: did not answer (connection refused)" in result.stderr
    assert SECRET not in result.stdout + result.stderr + Path(data["log"]).read_text()
    assert_no_secret_in(commands, SECRET)
