"""The cwsandbox client's own data path (issue 21, point 3): the real client against the local service
(``tests/fakes/cwsandbox_local.py``) and its direct data plane (``cwsandbox_direct.py``), loopback only.

In its default auto mode the client asks ``ConnectSandbox`` for a client certificate and runs execs and file
requests over mTLS on the sandbox's data plane; it falls back to the gateway when direct connect is refused
with a status that allows it. Both paths run the same processes and answer alike.
"""

from __future__ import annotations

import datetime as dt
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cwsandbox
import grpc  # type: ignore[import-untyped]
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cwsandbox import AuthHeaders, SandboxDefaults
from cwsandbox._proto import sandbox_data_plane_pb2_grpc as dp_grpc
from cwsandbox._proto import sandbox_pb2 as pb
from cwsandbox._proto import sandbox_pb2_grpc as pb_grpc
from cwsandbox.exceptions import CWSandboxError

from tests.fakes.cwsandbox_direct import READ_FILE, STREAM_EXEC, WRITE_FILE, CertificateAuthority, Grant
from tests.fakes.cwsandbox_local import Fault, LocalService, SandboxService

KEY = "cw-direct-key-5e21"
AUTH = (("authorization", f"Bearer {KEY}"),)


@pytest.fixture(autouse=True)
def _quiet_grpc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRPC_VERBOSITY", "ERROR")
    cwsandbox.disable_signal_handlers()


@pytest.fixture
def service(tmp_path: Path) -> Iterator[LocalService]:
    with LocalService(tmp_path / "service") as svc:
        yield svc


def start(svc: LocalService) -> Any:
    defaults = SandboxDefaults(
        base_url=svc.base_url, auth=AuthHeaders(headers={"Authorization": f"Bearer {KEY}"}, strategy="api_key")
    )
    sandbox = cwsandbox.Sandbox.run(defaults=defaults)
    sandbox.wait(timeout=30)
    return sandbox


SCRIPT = "import sys; sys.stdout.buffer.write(bytes(range(256)) * 2048); sys.stderr.write('warned'); sys.exit(3)"


def session(svc: LocalService, scratch: Path) -> dict[str, Any]:
    """What a client sees of one sandbox: an exec's bytes across many frames, its stderr and status, a line
    streamed as the project's desktop reads it, a file written and read back, a missing file."""
    sandbox = start(svc)
    scratch.mkdir()
    try:
        done = sandbox.exec([sys.executable, "-c", SCRIPT], timeout_seconds=10).result()
        process = sandbox.exec(["sh", "-c", "echo one; echo two"], timeout_seconds=10)
        lines = list(process.stdout)
        process.result()
        sandbox.write_file(str(scratch / "f.bin"), b"\x00\xffdata").result()
        back = sandbox.read_file(str(scratch / "f.bin")).result()
        with pytest.raises(CWSandboxError) as missing:
            sandbox.read_file(str(scratch / "missing")).result()
    finally:
        sandbox.stop(missing_ok=True).result()
    return {
        "stdout": done.stdout_bytes,
        "stderr": done.stderr,
        "returncode": done.returncode,
        "lines": "".join(lines),  # the frames' cut depends on timing (one frame or two), their text does not
        "file": back,
        "missing": type(missing.value).__name__,
    }


# ------------------------------------------------------------------------------------------------------
# The path each request takes
# ------------------------------------------------------------------------------------------------------
def test_execs_and_files_take_the_direct_path_by_default(tmp_path: Path, service: LocalService) -> None:
    seen = session(service, tmp_path / "scratch")
    assert seen["returncode"] == 3 and seen["stdout"] == bytes(range(256)) * 2048
    svc = service.service
    assert svc.paths("StreamExec") == ["direct", "direct"]
    assert svc.paths("WriteFile") == ["direct"] and svc.paths("ReadFile") == ["direct", "direct"]
    # one certificate per permission the client asked for, each naming the sandbox; nothing else granted
    (sandbox_id,) = {sid for _rpc, sid, _op in svc.requests if sid}
    assert service.direct is not None
    assert [grant.permissions for grant in service.direct.issued] == [
        {STREAM_EXEC},
        {WRITE_FILE},
        {READ_FILE},
    ]
    assert {grant.sandbox_id for grant in service.direct.issued} == {sandbox_id}
    # the API key goes to the service only: the data plane's requests carry the certificate instead
    for request, metadata in zip(svc.requests, svc.metadata, strict=True):
        assert (metadata.get("authorization") == f"Bearer {KEY}") == (request.path == "gateway"), request


def test_the_gateway_answers_the_same(tmp_path: Path) -> None:
    with LocalService(tmp_path / "direct") as direct, LocalService(tmp_path / "gateway", direct=False) as gateway:
        over_direct = session(direct, tmp_path / "scratch-direct")
        over_gateway = session(gateway, tmp_path / "scratch-gateway")
        assert over_direct == over_gateway
        assert set(direct.service.paths("StreamExec")) == {"direct"}
        assert set(gateway.service.paths("StreamExec")) == {"gateway"}
        assert gateway.direct is None and gateway.service.count("ConnectSandbox") >= 1


FALLBACK = [
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.UNIMPLEMENTED,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.INTERNAL,  # auto mode only: credential negotiation sent no data yet (cwsandbox/_direct.py)
]


@pytest.mark.parametrize("code", FALLBACK, ids=[c.name for c in FALLBACK])
def test_a_refused_connect_falls_back_to_the_gateway(service: LocalService, code: grpc.StatusCode) -> None:
    service.service.inject(Fault("ConnectSandbox", "abort", code))
    sandbox = start(service)
    try:
        result = sandbox.exec(["sh", "-c", "echo fell back"], timeout_seconds=10).result()
        again = sandbox.exec(["true"], timeout_seconds=10).result()
    finally:
        sandbox.stop(missing_ok=True).result()
    assert result.stdout == "fell back\n" and again.returncode == 0
    assert service.service.paths("StreamExec") == ["gateway", "gateway"]
    assert service.service.count("ConnectSandbox") == 1  # the client waits before it asks again


def test_a_connect_that_hangs_falls_back_within_the_clients_second(service: LocalService) -> None:
    service.service.inject(Fault("ConnectSandbox", "hang"))
    sandbox = start(service)
    try:
        started = time.monotonic()
        result = sandbox.exec(["true"], timeout_seconds=10).result()
        took = time.monotonic() - started
    finally:
        sandbox.stop(missing_ok=True).result()
    assert result.returncode == 0 and service.service.paths("StreamExec") == ["gateway"]
    assert 0.9 < took < 5, took


def test_a_connect_refused_outright_fails_the_exec_and_runs_nothing(service: LocalService) -> None:
    """PERMISSION_DENIED is no reason to take another way in: the client gives up."""
    service.service.inject(Fault("ConnectSandbox", "abort", grpc.StatusCode.PERMISSION_DENIED))
    sandbox = start(service)
    try:
        with pytest.raises(CWSandboxError):
            sandbox.exec(["true"], timeout_seconds=10).result()
    finally:
        sandbox.stop(missing_ok=True).result()
    assert service.service.count("StreamExec") == 0


# ------------------------------------------------------------------------------------------------------
# The same service behind the data plane: hooks, faults
# ------------------------------------------------------------------------------------------------------
class HookedService(SandboxService):
    """As a subclass that runs each sandbox in a container would: every exec goes through ``_exec_popen``."""

    hooked: list[list[str]] = []

    def _exec_popen(self, sb: Any, argv: list[str], env: dict[str, str]) -> Any:
        self.hooked.append(argv)
        return super()._exec_popen(sb, argv, env)


class HookedLocalService(LocalService):
    service_class = HookedService


def test_direct_execs_go_through_the_services_exec_hooks(tmp_path: Path) -> None:
    HookedService.hooked = []
    with HookedLocalService(tmp_path / "service") as svc:
        sandbox = start(svc)
        try:
            assert sandbox.exec(["echo", "hooked"], timeout_seconds=10).result().stdout == "hooked\n"
        finally:
            sandbox.stop(missing_ok=True).result()
        assert svc.service.paths("StreamExec") == ["direct"]
    assert HookedService.hooked == [["echo", "hooked"]]


EXEC_FAULTS = [
    ("no_exit", grpc.StatusCode.OK),
    ("abort", grpc.StatusCode.DEADLINE_EXCEEDED),
    ("hang", grpc.StatusCode.OK),
]


@pytest.mark.parametrize(("kind", "code"), EXEC_FAULTS, ids=["no-exit-frame", "deadline-exceeded", "exec-hangs"])
def test_an_injected_exec_fault_fails_alike_on_either_path(tmp_path: Path, kind: str, code: grpc.StatusCode) -> None:
    failures = {}
    for direct in (True, False):
        with LocalService(tmp_path / f"service-{direct}", direct=direct) as svc:
            sandbox = start(svc)
            try:
                svc.service.inject(Fault("StreamExec", kind, code))
                with pytest.raises(CWSandboxError) as failed:
                    sandbox.exec(["true"], timeout_seconds=2).result()
                assert sandbox.exec(["true"], timeout_seconds=5).result().returncode == 0  # one exec's fault
            finally:
                sandbox.stop(missing_ok=True).result()
            path = "direct" if direct else "gateway"
            assert svc.service.paths("StreamExec") == [path, path]
            failures[path] = type(failed.value).__name__
    assert failures["direct"] == failures["gateway"], failures


def test_the_client_replays_a_direct_exec_refused_unavailable_before_any_frame(
    tmp_path: Path, service: LocalService
) -> None:
    """On the direct path (only) the client replays an exec that failed UNAVAILABLE before the runner sent
    anything (the exec never started): one call, two requests, one process."""
    marks = tmp_path / "marks"
    sandbox = start(service)
    try:
        service.service.inject(Fault("StreamExec", "abort", grpc.StatusCode.UNAVAILABLE))
        assert sandbox.exec(["sh", "-c", f"echo ran >> {marks}"], timeout_seconds=10).result().returncode == 0
    finally:
        sandbox.stop(missing_ok=True).result()
    assert service.service.paths("StreamExec") == ["direct", "direct"]
    assert marks.read_text() == "ran\n"


# ------------------------------------------------------------------------------------------------------
# The mTLS is real
# ------------------------------------------------------------------------------------------------------
def csr_for(key: ec.EllipticCurvePrivateKey) -> bytes:
    csr = x509.CertificateSigningRequestBuilder().subject_name(x509.Name([])).sign(key, hashes.SHA256())
    return csr.public_bytes(serialization.Encoding.DER)


def connect(svc: LocalService, sandbox_id: str, permission: pb.SandboxDataPermission, csr_der: bytes) -> Any:
    with grpc.insecure_channel(f"127.0.0.1:{svc.port}") as channel:
        request = pb.ConnectSandboxRequest(sandbox_id=sandbox_id, csr_der=csr_der, requested_permissions=[permission])
        stub = pb_grpc.SandboxServiceStub(channel)  # type: ignore[no-untyped-call]
        return stub.ConnectSandbox(request, timeout=5, metadata=AUTH)


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def raw_exec(svc: LocalService, sandbox_id: str, credentials: grpc.ChannelCredentials) -> tuple[bytes, int]:
    """One StreamExec on the data plane with these credentials: stdout and the exit code."""
    assert svc.direct is not None
    init = pb.ExecStreamInit(sandbox_id=sandbox_id, command=["echo", "in"])
    with grpc.secure_channel(f"127.0.0.1:{svc.direct.port}", credentials) as channel:
        stub = dp_grpc.SandboxDataPlaneServiceStub(channel)  # type: ignore[no-untyped-call]
        out, code = b"", -1
        for response in stub.StreamExec(iter([pb.ExecStreamRequest(init=init)]), timeout=5):
            if response.HasField("output"):
                out += response.output.data
            if response.HasField("exit"):
                code = response.exit.exit_code
        return out, code


def test_the_data_plane_admits_only_the_certificate_it_issued(service: LocalService) -> None:
    assert service.direct is not None
    ca = service.direct.ca.pem
    first, second = start(service), start(service)
    try:
        key = ec.generate_private_key(ec.SECP256R1())
        issued = connect(service, first.sandbox_id, STREAM_EXEC, csr_for(key))
        assert issued.endpoint_uri == service.direct.endpoint_uri and issued.server_ca_bundle_pem == ca
        assert list(issued.granted_permissions) == [STREAM_EXEC]
        mine = grpc.ssl_channel_credentials(ca, key_pem(key), issued.client_certificate_chain_pem)
        assert raw_exec(service, first.sandbox_id, mine) == (b"in\n", 0)
        before = service.service.count()

        def refused(credentials: grpc.ChannelCredentials, sandbox_id: str = first.sandbox_id) -> grpc.StatusCode:
            with pytest.raises(grpc.RpcError) as caught:
                raw_exec(service, sandbox_id, credentials)
            return caught.value.code()

        # no client certificate; one from another CA naming the same sandbox; the issued one, expired: the
        # handshake fails and no request reaches the service
        other = CertificateAuthority().issue(key.public_key(), first.sandbox_id, [STREAM_EXEC], dt.timedelta(hours=1))
        expired = service.direct.ca.issue(key.public_key(), first.sandbox_id, [STREAM_EXEC], dt.timedelta(seconds=-5))
        assert refused(grpc.ssl_channel_credentials(ca)) == grpc.StatusCode.UNAVAILABLE
        assert refused(grpc.ssl_channel_credentials(ca, key_pem(key), other[0])) == grpc.StatusCode.UNAVAILABLE
        assert refused(grpc.ssl_channel_credentials(ca, key_pem(key), expired[0])) == grpc.StatusCode.UNAVAILABLE
        # the issued certificate with another key: the handshake proves the key
        stranger = key_pem(ec.generate_private_key(ec.SECP256R1()))
        chain = issued.client_certificate_chain_pem
        assert refused(grpc.ssl_channel_credentials(ca, stranger, chain)) == grpc.StatusCode.UNAVAILABLE
        # the data plane presents a certificate only its own CA vouches for
        elsewhere = CertificateAuthority().pem
        assert refused(grpc.ssl_channel_credentials(elsewhere, key_pem(key), chain)) == grpc.StatusCode.UNAVAILABLE
        assert service.service.count() == before
        # past the handshake: the certificate names one sandbox and the permissions granted
        assert refused(mine, second.sandbox_id) == grpc.StatusCode.PERMISSION_DENIED
        read_only = connect(service, first.sandbox_id, READ_FILE, csr_for(key))
        assert list(read_only.granted_permissions) == [READ_FILE]
        reader = grpc.ssl_channel_credentials(ca, key_pem(key), read_only.client_certificate_chain_pem)
        assert refused(reader) == grpc.StatusCode.PERMISSION_DENIED
        assert service.service.paths("StreamExec") == ["direct"] * 3  # counted, refused, never run
        assert service.service.exec_argv == [["echo", "in"]]
    finally:
        first.stop(missing_ok=True).result()
        second.stop(missing_ok=True).result()


def test_connect_issues_only_for_a_running_sandbox_a_proven_key_and_what_it_serves(service: LocalService) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    sandbox = start(service)
    try:
        with pytest.raises(grpc.RpcError) as unknown:
            connect(service, "sb-nobody", STREAM_EXEC, csr_for(key))
        assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.RpcError) as garbage:
            connect(service, sandbox.sandbox_id, STREAM_EXEC, b"not a CSR")
        assert garbage.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        forged = bytearray(csr_for(key))
        forged[-3] ^= 0xFF  # inside the signature: the CSR no longer proves the key
        with pytest.raises(grpc.RpcError) as unproven:
            connect(service, sandbox.sandbox_id, STREAM_EXEC, bytes(forged))
        assert unproven.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        # Exec and StreamLogs are not served on the data plane (nor the gateway): not granted
        unary = connect(service, sandbox.sandbox_id, pb.SANDBOX_DATA_PERMISSION_EXEC, csr_for(key))
        assert list(unary.granted_permissions) == []
        certificate = x509.load_pem_x509_certificate(unary.client_certificate_chain_pem)
        assert Grant.of(certificate) == Grant(sandbox.sandbox_id, frozenset())
        assert certificate.public_key() == key.public_key()
        assert unary.expires_at.ToDatetime(tzinfo=dt.UTC) > dt.datetime.now(dt.UTC) + dt.timedelta(minutes=30)
    finally:
        sandbox.stop(missing_ok=True).result()
    with pytest.raises(grpc.RpcError) as stopped:
        connect(service, sandbox.sandbox_id, STREAM_EXEC, csr_for(key))
    assert stopped.value.code() == grpc.StatusCode.FAILED_PRECONDITION
