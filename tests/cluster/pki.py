"""Throw-away PKI for the test control plane, made with the openssl CLI (no Python crypto dependency).

One CA signs the apiserver serving certificate and the admin client certificate (O=system:masters); a separate
RSA pair signs and verifies service-account tokens.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

# SANs cover loopback and the in-cluster names, so both the tests and in-pod clients can verify the server.
_SERVER_SANS = (
    "IP:127.0.0.1,DNS:localhost,IP:10.0.0.1,DNS:kubernetes,DNS:kubernetes.default,"
    "DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
)


@dataclass(frozen=True)
class Pki:
    dir: Path

    @property
    def ca_crt(self) -> Path:
        return self.dir / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.dir / "ca.key"

    @property
    def apiserver_crt(self) -> Path:
        return self.dir / "apiserver.crt"

    @property
    def apiserver_key(self) -> Path:
        return self.dir / "apiserver.key"

    @property
    def admin_crt(self) -> Path:
        return self.dir / "admin.crt"

    @property
    def admin_key(self) -> Path:
        return self.dir / "admin.key"

    @property
    def sa_key(self) -> Path:
        return self.dir / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.dir / "sa.pub"


def _openssl(*args: str, cwd: Path) -> None:
    out = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)} failed ({out.returncode}): {out.stderr.strip()}")


def _signed_cert(d: Path, name: str, subject: str, ext_lines: list[str]) -> None:
    _openssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-sha256",
        "-keyout",
        f"{name}.key",
        "-out",
        f"{name}.csr",
        "-subj",
        subject,
        cwd=d,
    )
    (d / f"{name}.ext").write_text("\n".join(ext_lines) + "\n")
    _openssl(
        "x509",
        "-req",
        "-sha256",
        "-days",
        "3650",
        "-in",
        f"{name}.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-extfile",
        f"{name}.ext",
        "-out",
        f"{name}.crt",
        cwd=d,
    )


def make_pki(directory: Path, server_ips: tuple[str, ...] = ()) -> Pki:
    """Create CA, apiserver serving cert, admin client cert and the service-account key pair in `directory`.

    `server_ips` are more IP SANs of the serving certificate (the real node reaches the apiserver on its bridge
    address, see realnode.py)."""
    if shutil.which("openssl") is None:
        raise RuntimeError("openssl is required to create the test control plane's certificates")
    directory.mkdir(parents=True, exist_ok=True)
    d = directory
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-sha256",
        "-days",
        "3650",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-subj",
        "/CN=dreamkeeper-test-ca",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
        cwd=d,
    )
    _signed_cert(
        d,
        "apiserver",
        "/CN=kube-apiserver",
        [
            "basicConstraints=CA:FALSE",
            "keyUsage=critical,digitalSignature,keyEncipherment",
            "extendedKeyUsage=serverAuth",
            f"subjectAltName={_SERVER_SANS}{''.join(f',IP:{ip}' for ip in server_ips)}",
        ],
    )
    _signed_cert(
        d,
        "admin",
        "/O=system:masters/CN=dreamkeeper-test-admin",
        [
            "basicConstraints=CA:FALSE",
            "keyUsage=critical,digitalSignature,keyEncipherment",
            "extendedKeyUsage=clientAuth",
        ],
    )
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=d)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=d)
    return Pki(d)


def issue_client_cert(pki: Pki, name: str, subject: str) -> tuple[Path, Path]:
    """A client certificate signed by the test CA (e.g. `/O=system:nodes/CN=system:node:<node>` for a kubelet);
    returns (certificate, key) in the PKI directory."""
    _signed_cert(
        pki.dir,
        name,
        subject,
        [
            "basicConstraints=CA:FALSE",
            "keyUsage=critical,digitalSignature,keyEncipherment",
            "extendedKeyUsage=clientAuth",
        ],
    )
    return pki.dir / f"{name}.crt", pki.dir / f"{name}.key"
