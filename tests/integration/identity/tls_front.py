"""An https front for a gateway under test: TLS on one port, the gateway's plain HTTP behind.

A gateway's public URL must be https for it to offer its client ID metadata document as its
client_id (authorization servers fetch client IDs over https only), as a deployment's TLS
terminating proxy makes it. The certificate is made here for ``127.0.0.1`` (its own CA: the
tests' HTTP clients and the identity providers' Node are told to trust it, nothing else).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for ``127.0.0.1`` (its own CA) and its key, written to ``folder``."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "front-cert.pem", folder / "front-key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, ssl.SSLError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


@contextlib.contextmanager
def tls_front(folder: Path, *, port: int, backend_port: int) -> Iterator[Path]:
    """TLS on ``127.0.0.1:port`` in front of ``127.0.0.1:backend_port``, in a thread of its
    own until exit; yields the certificate file to trust."""
    cert, key = self_signed(folder)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    loop = asyncio.new_event_loop()
    started = threading.Event()

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            back_reader, back_writer = await asyncio.open_connection("127.0.0.1", backend_port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, back_writer), _pipe(back_reader, writer))

    async def serve() -> asyncio.Server:
        return await asyncio.start_server(connection, "127.0.0.1", port, ssl=context)

    def run() -> None:
        asyncio.set_event_loop(loop)
        server = loop.run_until_complete(serve())
        started.set()
        loop.run_forever()
        server.close()
        open_ones = asyncio.all_tasks(loop)  # the connections still open
        for task in open_ones:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*open_ones, return_exceptions=True))
        loop.close()

    thread = threading.Thread(target=run, name="tls-front", daemon=True)
    thread.start()
    started.wait(10)
    try:
        yield cert
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
