"""The tool's own downloads trust what uv trusts: behind a proxy with its own certificate
authority, named in SSL_CERT_FILE (uv's variable), a vendor file comes over https as it does for
uv, and without that authority it is refused, never taken unchecked."""

from __future__ import annotations

import http.server
import ssl
import threading
from pathlib import Path
from typing import Iterator, Tuple

import pytest
from support.tls import local_authority

from jetson_install.base.errors import StepFailed
from jetson_install.tools import index

pytestmark = pytest.mark.slow  # openssl makes an authority and a certificate


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Tuple[str, Path]]:
    """(the https URL of a file on 127.0.0.1, the authority's certificate), the server's signed by it."""
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR"):
        monkeypatch.delenv(name, raising=False)
    authority = local_authority(tmp_path, ["127.0.0.1"], "a proxy's own authority")
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "torch.whl").write_bytes(b"wheel bytes")
    folder = str(tmp_path / "www")

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, directory=folder, **kwargs)  # type: ignore[arg-type]

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(authority.cert), str(authority.key))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    # polled every 0.05 s: shutdown() waits out a poll, the default 0.5 s at each test's end
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}/torch.whl", authority.ca
    finally:
        server.shutdown()
        server.server_close()


def test_a_file_behind_a_proxys_own_authority_comes_with_ssl_cert_file_and_is_refused_without_it(
        served: Tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url, authority = served
    with pytest.raises(StepFailed) as refused:
        index.fetch_file(url, tmp_path / "refused.whl")
    assert refused.value.message == f"could not fetch {url} (SSLError)"
    monkeypatch.setenv("SSL_CERT_FILE", str(authority))
    index.fetch_file(url, tmp_path / "torch.whl")
    assert (tmp_path / "torch.whl").read_bytes() == b"wheel bytes"
    # requests' own variable, where the user set one, comes first.
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(tmp_path / "cert.pem"))
    assert index.trusted_certificates() == str(tmp_path / "cert.pem")
