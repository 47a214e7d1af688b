"""The tool's own downloads trust what uv trusts: behind a proxy with its own certificate
authority, named in SSL_CERT_FILE (uv's variable), a vendor file comes over https as it does for
uv, and without that authority it is refused, never taken unchecked."""

from __future__ import annotations

import http.server
import ssl
import subprocess
import threading
from pathlib import Path
from typing import Iterator, Tuple

import pytest

from jetson_install.base.errors import StepFailed
from jetson_install.tools import index

pytestmark = pytest.mark.slow  # openssl makes an authority and a certificate


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=120)


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Tuple[str, Path]]:
    """(the https URL of a file on 127.0.0.1, the authority's certificate), the server's signed by it."""
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR"):
        monkeypatch.delenv(name, raising=False)
    ca_key, ca, key, request, cert = (tmp_path / name for name in ("ca.key", "ca.pem", "key.pem", "req.csr", "cert.pem"))
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out", str(ca), "-days", "1",
             "-subj", "/CN=a proxy's own authority")
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(request), "-subj", "/CN=127.0.0.1")
    (tmp_path / "san.cnf").write_text("subjectAltName=IP:127.0.0.1\n")
    _openssl("x509", "-req", "-in", str(request), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
             "-out", str(cert), "-days", "1", "-extfile", str(tmp_path / "san.cnf"))
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
    context.load_cert_chain(str(cert), str(key))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}/torch.whl", ca
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
