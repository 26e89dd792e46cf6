"""The direct data plane of the local CoreWeave Sandboxes service (``cwsandbox_local.py``), for the tests and
the benchmarks: what the real cwsandbox client talks to after ``ConnectSandbox``, as a real run does.

A certificate authority made at start signs the data plane's server certificate (for 127.0.0.1, the address
the client dials) and, per ``ConnectSandbox``, a short-lived client certificate for the key of the client's
CSR, naming the sandbox and the permissions granted. The data plane is a gRPC server of its own on 127.0.0.1
that admits only such certificates (mTLS) and serves ``SandboxDataPlaneService``'s StreamExec, ReadFile and
WriteFile through the service's own code: the same processes, faults and counts as the gateway's RPCs.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import secrets
from collections.abc import Callable, Iterable
from concurrent import futures
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import grpc  # type: ignore[import-untyped]
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from cwsandbox._proto import sandbox_data_plane_pb2_grpc as dp_grpc
from cwsandbox._proto import sandbox_pb2 as pb

HOST = "127.0.0.1"
CLIENT_LIFETIME = dt.timedelta(hours=1)  # the client renews 30 s before the end
CA_LIFETIME = dt.timedelta(days=2)
# certificates start a little in the past, as a clock may be behind
SKEW = dt.timedelta(minutes=1)
SANDBOX_URI = "urn:cwsandbox:sandbox:"
PERMISSION_URI = "urn:cwsandbox:permission:"
STREAM_EXEC = pb.SANDBOX_DATA_PERMISSION_STREAM_EXEC
READ_FILE = pb.SANDBOX_DATA_PERMISSION_READ_FILE
WRITE_FILE = pb.SANDBOX_DATA_PERMISSION_WRITE_FILE
# What the data plane serves. Exec and StreamLogs are not granted (the gateway does not serve them
# either): the client, missing the permission, takes the gateway for them.
SERVED = (STREAM_EXEC, READ_FILE, WRITE_FILE)

# (sandbox id, gRPC context): returns, or aborts the request
Admit = Callable[[str, Any], None]
# which way a data call came: an RPC of the service (its gateway), or this data plane
DataPath = Literal["gateway", "direct"]


class Served(Protocol):
    """What the data plane needs of the service (``cwsandbox_local.SandboxService``): its interceptors and
    its data calls on either path. A protocol, so that the service imports this module and not the reverse."""

    interceptors: list[Any]

    def _stream_exec(self, request_iterator: Any, context: Any, path: DataPath, admit: Admit | None = None) -> Any: ...

    def _read_file(self, request: Any, context: Any, path: DataPath, admit: Admit | None = None) -> Any: ...

    def _write_file(self, request: Any, context: Any, path: DataPath, admit: Admit | None = None) -> Any: ...


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(microsecond=0)


def _pem(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


def _usage(*, ca: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=not ca,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


class CertificateAuthority:
    """A CA made at start (an EC P-256 key held in memory): it signs the data plane's server certificate and
    the clients' certificates; its certificate is the bundle both sides trust."""

    def __init__(self, name: str = "cua-tui local sandboxes CA") -> None:
        self._key = ec.generate_private_key(ec.SECP256R1())
        self.name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = _now()
        self.certificate = (
            x509.CertificateBuilder()
            .subject_name(self.name)
            .issuer_name(self.name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - SKEW)
            .not_valid_after(now + CA_LIFETIME)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(_usage(ca=True), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        self.pem = _pem(self.certificate)

    def _leaf(
        self,
        subject: str,
        public_key: Any,
        names: list[x509.GeneralName],
        purpose: x509.ObjectIdentifier,
        not_after: dt.datetime,
    ) -> x509.Certificate:
        return (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(self.name)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(_now() - SKEW)
            .not_valid_after(not_after)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(_usage(ca=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([purpose]), critical=False)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()), critical=False)
            .sign(self._key, hashes.SHA256())
        )

    def server_identity(self, host: str) -> tuple[bytes, bytes]:
        """A key and a server certificate for ``host`` (an IP address), PEM: what the data plane presents."""
        key = ec.generate_private_key(ec.SECP256R1())
        names: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address(host)), x509.DNSName("localhost")]
        certificate = self._leaf(host, key.public_key(), names, ExtendedKeyUsageOID.SERVER_AUTH, _now() + CA_LIFETIME)
        key_pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        return key_pem, _pem(certificate)

    def issue(
        self, public_key: Any, sandbox_id: str, permissions: Iterable[int], lifetime: dt.timedelta
    ) -> tuple[bytes, dt.datetime]:
        """A client certificate for ``public_key`` (the CSR's: the private key never leaves the client) that
        names the sandbox and the permissions granted; PEM, and when it ends."""
        expires = _now() + lifetime
        names: list[x509.GeneralName] = [x509.UniformResourceIdentifier(SANDBOX_URI + sandbox_id)]
        names += [
            x509.UniformResourceIdentifier(PERMISSION_URI + pb.SandboxDataPermission.Name(p)) for p in permissions
        ]
        certificate = self._leaf(sandbox_id, public_key, names, ExtendedKeyUsageOID.CLIENT_AUTH, expires)
        return _pem(certificate), expires


@dataclass(frozen=True)
class Grant:
    """What a client certificate grants: one sandbox, some permissions."""

    sandbox_id: str
    permissions: frozenset[int]

    @classmethod
    def of(cls, certificate: x509.Certificate) -> Grant:
        try:
            names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        except x509.ExtensionNotFound:
            return cls("", frozenset())
        uris = names.get_values_for_type(x509.UniformResourceIdentifier)
        sandboxes = [u.removeprefix(SANDBOX_URI) for u in uris if u.startswith(SANDBOX_URI)]
        permissions = set()
        for uri in uris:
            if uri.startswith(PERMISSION_URI):
                try:
                    permissions.add(int(pb.SandboxDataPermission.Value(uri.removeprefix(PERMISSION_URI))))
                except ValueError:
                    continue
        # exactly one sandbox, or none at all: a certificate naming two is nobody's
        return cls(sandboxes[0] if len(sandboxes) == 1 else "", frozenset(permissions))


def peer_grant(context: Any) -> Grant | None:
    """The grant of the certificate the peer presented (the TLS handshake has checked it against the CA)."""
    pems = context.auth_context().get("x509_pem_cert")
    if not pems:
        return None
    return Grant.of(x509.load_pem_x509_certificate(pems[0]))


def admit(permission: int) -> Admit:
    """The check a data-plane request passes after it is counted: its certificate names its sandbox and
    grants the RPC's permission."""

    def check(sandbox_id: str, context: Any) -> None:
        grant = peer_grant(context)
        if grant is None:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "no client certificate")
        assert grant is not None
        if not grant.sandbox_id or grant.sandbox_id != sandbox_id:
            context.abort(
                grpc.StatusCode.PERMISSION_DENIED,
                f"the certificate is for sandbox {grant.sandbox_id or '(none)'}, not {sandbox_id}",
            )
        if permission not in grant.permissions:
            name = pb.SandboxDataPermission.Name(permission)
            context.abort(grpc.StatusCode.PERMISSION_DENIED, f"the certificate does not grant {name}")

    return check


class DataPlaneService(dp_grpc.SandboxDataPlaneServiceServicer):
    """The data plane's RPCs: the service's own, recorded with ``path="direct"`` and admitted by certificate.
    Exec and StreamLogs stay UNIMPLEMENTED, as on the gateway."""

    def __init__(self, service: Served) -> None:
        self.service = service

    def StreamExec(self, request_iterator: Any, context: Any) -> Any:
        yield from self.service._stream_exec(request_iterator, context, "direct", admit(STREAM_EXEC))

    def ReadFile(self, request: Any, context: Any) -> Any:
        return self.service._read_file(request, context, "direct", admit(READ_FILE))

    def WriteFile(self, request: Any, context: Any) -> Any:
        return self.service._write_file(request, context, "direct", admit(WRITE_FILE))


class DirectDataPlane:
    """The CA and the data-plane server (127.0.0.1, an ephemeral port, client certificates required), and
    ``connect``: ConnectSandbox's answer once the service has found the sandbox running."""

    def __init__(self, service: Served, *, workers: int = 64, lifetime: dt.timedelta = CLIENT_LIFETIME):
        self.ca = CertificateAuthority()
        self.lifetime = lifetime
        self.endpoint_id = "local-runner-" + secrets.token_hex(4)
        self.issued: list[Grant] = []  # every client certificate issued, in order
        key_pem, cert_pem = self.ca.server_identity(HOST)
        credentials = grpc.ssl_server_credentials(
            [(key_pem, cert_pem)], root_certificates=self.ca.pem, require_client_auth=True
        )
        # the service's interceptors (an injected delay) apply on this path as on the gateway
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers), interceptors=service.interceptors)
        dp_grpc.add_SandboxDataPlaneServiceServicer_to_server(  # type: ignore[no-untyped-call]
            DataPlaneService(service), self.server
        )
        self.port: int = self.server.add_secure_port(f"{HOST}:0", credentials)
        self.server.start()

    @property
    def endpoint_uri(self) -> str:
        return f"https://{HOST}:{self.port}"

    def connect(self, request: Any, context: Any) -> pb.SandboxConnection:
        """Issue a certificate for the CSR's key, for this sandbox, with the requested permissions the data
        plane serves (the client takes the gateway for any it is not granted)."""
        try:
            csr = x509.load_der_x509_csr(bytes(request.csr_der))
        except ValueError:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "csr_der is not a DER certificate signing request")
        if not csr.is_signature_valid:
            # the client must prove it holds the key the certificate will name
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the CSR's signature does not verify")
        granted = [p for p in dict.fromkeys(request.requested_permissions) if p in SERVED]
        chain, expires = self.ca.issue(csr.public_key(), request.sandbox_id, granted, self.lifetime)
        self.issued.append(Grant(request.sandbox_id, frozenset(int(p) for p in granted)))
        connection = pb.SandboxConnection(
            endpoint_uri=self.endpoint_uri,
            client_certificate_chain_pem=chain,
            server_ca_bundle_pem=self.ca.pem,
            endpoint_id=self.endpoint_id,
            transport=pb.SANDBOX_DATA_TRANSPORT_DIRECT_MTLS,
            protocol=pb.SANDBOX_DATA_PROTOCOL_CONNECT_H2_V1,
            granted_permissions=granted,
        )
        connection.expires_at.FromSeconds(int(expires.timestamp()))
        return connection

    def stop(self) -> None:
        self.server.stop(grace=1).wait()
