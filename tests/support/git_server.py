"""Git repositories over HTTP on 127.0.0.1 that want credentials, and git and uv that log
every command line they are given.

`GitServer` serves a folder's bare repositories with git's dumb HTTP protocol (static files
after `git update-server-info`), each repository answering only the HTTP Basic credentials
given for it, so a test sees whether a token reached the server and, with `logged_commands`,
whether it reached a command line on the way.
"""

from __future__ import annotations

import base64
import subprocess
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Dict, List, Tuple

__all__ = ["GitServer", "bare_repository", "logging_wrappers"]


def bare_repository(checkout: Path, served: Path) -> Path:
    """A bare clone of `checkout` at `served`, ready for the dumb HTTP protocol."""
    subprocess.run(["git", "clone", "--quiet", "--bare", str(checkout), str(served)], check=True, capture_output=True)
    subprocess.run(["git", "-C", str(served), "update-server-info"], check=True, capture_output=True)
    return served


class GitServer:
    """`folder` over HTTP; `userinfo` maps a top-level name under it (`repo.git`) to the
    credentials it accepts, as a URL gives them: `user:token`, or a lone `token`."""

    def __init__(self, folder: Path, userinfo: Dict[str, Tuple[str, ...]]) -> None:
        self.seen: List[Tuple[str, bool]] = []  # (path, whether its credentials were right)
        wanted = {name: {"Basic " + base64.b64encode((one if ":" in one else f"{one}:").encode()).decode()
                         for one in accepted}
                  for name, accepted in userinfo.items()}
        seen = self.seen

        class Guarded(SimpleHTTPRequestHandler):
            def do_GET(self) -> None:
                top = self.path.lstrip("/").split("/", 1)[0]
                allowed = self.headers.get("Authorization") in wanted.get(top, set())
                seen.append((self.path, allowed))
                if not allowed:
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="test"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                super().do_GET()

            def log_message(self, *args: object) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), partial(Guarded, directory=str(folder)))
        # polled every 0.05 s: shutdown() waits out a poll, the default 0.5 s at each test's end
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> "GitServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def url(self, name: str, userinfo: str = "") -> str:
        """http://[USERINFO@]127.0.0.1:PORT/NAME"""
        return f"http://{userinfo + '@' if userinfo else ''}127.0.0.1:{self._httpd.server_address[1]}/{name}"


def logging_wrappers(folder: Path, log: Path, real: Dict[str, str]) -> Dict[str, Path]:
    """For each name -> real binary, a script in `folder` that appends its whole command line
    (`NAME ARG ...`, one line) to `log`, then runs the real binary with it."""
    folder.mkdir(parents=True, exist_ok=True)
    made = {}
    for name, binary in real.items():
        script = folder / name
        script.write_text(f'#!/bin/sh\nprintf "%s\\n" "{name} $*" >> "{log}"\nexec "{binary}" "$@"\n')
        script.chmod(0o755)
        made[name] = script
    return made
