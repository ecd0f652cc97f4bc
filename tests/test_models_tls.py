"""Model providers' HTTP clients share one TLS context per process, and it still verifies.

Each check runs in a child process, so the process's TLS context is built there,
from that process's environment (``SSL_CERT_FILE``, proxy variables).
"""

from __future__ import annotations

import datetime
import http.server
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from _helpers import child_env

pytestmark = pytest.mark.process  # the TLS context is the child's, from its environment

_CLIENT = """
import asyncio, sys
from personae.models._http import shared_tls_client

async def main() -> str:
    client = shared_tls_client()
    if client is None:
        return "own client"
    a, b = client, shared_tls_client()
    pools = {id(c._transport._pool._ssl_context) for c in (a, b)}
    try:
        answer = await client.get(sys.argv[1])
        return f"{answer.status_code} {len(pools)}"
    except Exception as exc:
        return f"refused {exc}"
    finally:
        await a.aclose()
        await b.aclose()

print(asyncio.run(main()))
"""


def _certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for localhost and its key."""
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:  # pragma: no cover - installed with the mcp extra
        pytest.fail("the TLS test needs the 'cryptography' package (installed by .ci/run)")
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """An HTTPS server on loopback with a self-signed certificate: (url, certificate)."""
    cert, key = _certificate(tmp_path)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://localhost:{server.server_address[1]}/", cert
    finally:
        server.shutdown()
        server.server_close()


_PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")
_AMBIENT = (*_PROXIES, *(p.lower() for p in _PROXIES), "SSL_CERT_FILE", "SSL_CERT_DIR")
"""This machine's proxy and certificate settings: not the child's."""


def _ask(url: str, **env: str) -> str:
    """What a child process's shared client says when it asks ``url``."""
    done = subprocess.run(
        [sys.executable, "-c", _CLIENT, url],
        env=child_env(env, drop=_AMBIENT),
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_shared_context_verifies_and_honours_ssl_cert_file(
    tls_server: tuple[str, Path],
) -> None:
    url, cert = tls_server
    # an unknown certificate is refused: verification stays on
    assert "CERTIFICATE_VERIFY_FAILED" in _ask(url)
    # SSL_CERT_FILE is read as the client would read it; both clients share one context
    assert _ask(url, SSL_CERT_FILE=str(cert)) == "200 1"


def test_a_proxy_variable_leaves_the_client_to_the_provider(
    tls_server: tuple[str, Path],
) -> None:
    url, _ = tls_server
    assert _ask(url, HTTPS_PROXY="http://127.0.0.1:9") == "own client"
