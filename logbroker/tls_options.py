"""`TlsOptions`: how a node's listeners speak TLS, as RabbitMQ's `ssl_options` say it.

One set of options serves every TLS listener of a node (AMQPS, HTTPS and WSS):
the certificate chain and key, the CA bundle that peer certificates must chain
to, whether peers are asked for a certificate (`verify` = `peer`) and whether a
peer without one is refused (`fail_if_no_peer_cert`), the protocol versions
(TLS 1.2 and 1.3 unless told otherwise: older versions are broken) and the
cipher list. `server_context` builds the `ssl.SSLContext` the listeners use;
bad files or values are a `TlsOptionsError` naming what is wrong, raised at
start, never at the first handshake.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

__all__ = ["LOGIN_FROM", "SAN_TYPES", "TLS_VERSIONS", "TlsOptions", "TlsOptionsError",
           "peer_user_name"]

TLS_VERSIONS = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}
VERIFY_MODES = ("none", "peer")


class TlsOptionsError(ValueError):
    pass


@dataclass(frozen=True)
class TlsOptions:
    cert_file: str
    key_file: str
    ca_file: str = ""
    verify: str = "none"  # none | peer
    fail_if_no_peer_cert: bool = False
    key_password: str = ""
    versions: tuple[str, ...] = ("1.2", "1.3")
    ciphers: str = ""  # OpenSSL cipher list for TLS 1.2 ("": OpenSSL's defaults)
    login_from: str = "common_name"  # EXTERNAL's user: common_name | subject_alternative_name
    login_san_type: str = "dns"  # which SAN, for subject_alternative_name: dns | email | uri

    def __post_init__(self) -> None:
        if self.verify not in VERIFY_MODES:
            raise TlsOptionsError(f"tls verify {self.verify!r} must be one of "
                                  f"{', '.join(VERIFY_MODES)}")
        unknown = [version for version in self.versions if version not in TLS_VERSIONS]
        if unknown or not self.versions:
            raise TlsOptionsError(f"tls versions {','.join(self.versions)!r}: each must be "
                                  f"one of {', '.join(TLS_VERSIONS)}")
        if self.verify == "peer" and not self.ca_file:
            raise TlsOptionsError("tls verify peer needs a CA file (--tls-ca) to check "
                                  "peer certificates against")
        if self.fail_if_no_peer_cert and self.verify != "peer":
            raise TlsOptionsError("tls fail_if_no_peer_cert needs verify peer")
        if self.login_from not in LOGIN_FROM:
            raise TlsOptionsError(f"tls login_from {self.login_from!r} must be one of "
                                  f"{', '.join(LOGIN_FROM)}")
        if self.login_san_type not in SAN_TYPES:
            raise TlsOptionsError(f"tls login_san_type {self.login_san_type!r} must be one "
                                  f"of {', '.join(SAN_TYPES)}")

    @property
    def verifies_peers(self) -> bool:
        return self.verify == "peer"

    def server_context(self) -> ssl.SSLContext:
        """The context a TLS listener wraps its accepted sockets with."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._restrict_versions(context)
        self._load_chain(context)
        if self.ca_file:
            self._load_ca(context)
        if self.verify == "peer":
            context.verify_mode = (ssl.CERT_REQUIRED if self.fail_if_no_peer_cert
                                   else ssl.CERT_OPTIONAL)
        else:
            context.verify_mode = ssl.CERT_NONE
        return context

    def link_contexts(self) -> tuple[ssl.SSLContext, ssl.SSLContext]:
        """(accepting, dialing) contexts for the cluster link: mutual verification, each
        node presenting its certificate and requiring the other's, both chained to the
        CA. Host names are not matched (nodes dial addresses that certificates seldom
        name); the chain proves membership of the deployment, the shared secret and the
        node names of the link's own handshake do the rest."""
        if not self.ca_file:
            raise TlsOptionsError("TLS on the cluster link needs a CA file (--tls-ca) to "
                                  "verify the other nodes' certificates")
        accepting = self.server_context()
        accepting.verify_mode = ssl.CERT_REQUIRED
        dialing = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        self._restrict_versions(dialing)
        self._load_chain(dialing)
        self._load_ca(dialing)
        dialing.check_hostname = False
        dialing.verify_mode = ssl.CERT_REQUIRED
        return accepting, dialing

    def reload_into(self, contexts: list[ssl.SSLContext]) -> None:
        """Read the certificate, key and CA files again into contexts made from these
        options (SIGHUP): new connections get the new certificate, open ones keep theirs.
        A CA file can add trusted CAs this way, never take one back (OpenSSL keeps what
        a context loaded): dropping a CA takes a restart. Raises TlsOptionsError and
        leaves the contexts as they were when a file is bad."""
        self.server_context()  # every file reads and matches, or nothing changes
        for context in contexts:
            self._load_chain(context)
            if self.ca_file:
                self._load_ca(context)

    def _restrict_versions(self, context: ssl.SSLContext) -> None:
        chosen = sorted(TLS_VERSIONS[version] for version in self.versions)
        context.minimum_version = chosen[0]
        context.maximum_version = chosen[-1]
        if self.ciphers:
            try:
                context.set_ciphers(self.ciphers)
            except ssl.SSLError as error:
                raise TlsOptionsError(f"tls ciphers {self.ciphers!r}: {error}") from error

    def _load_chain(self, context: ssl.SSLContext) -> None:
        try:
            context.load_cert_chain(self.cert_file, self.key_file,
                                    password=self.key_password or None)
        except (OSError, ssl.SSLError) as error:
            raise TlsOptionsError(f"tls certificate {self.cert_file} / key {self.key_file}: "
                                  f"{error}") from error

    def _load_ca(self, context: ssl.SSLContext) -> None:
        try:
            context.load_verify_locations(cafile=self.ca_file)
        except (OSError, ssl.SSLError) as error:
            raise TlsOptionsError(f"tls CA file {self.ca_file}: {error}") from error


LOGIN_FROM = ("common_name", "subject_alternative_name")
SAN_TYPES = {"dns": "DNS", "email": "email", "uri": "URI"}


def peer_user_name(peer_cert: dict[str, object] | None, login_from: str = "common_name",
                   san_type: str = "dns") -> str | None:
    """The user a verified client certificate names, as RabbitMQ's EXTERNAL mechanism
    takes it (`ssl_cert_login_from`): the subject's common name (CN), or the first
    subject alternative name of `san_type` (dns, email, uri). None: no certificate,
    or no such name in it."""
    if not peer_cert:
        return None
    if login_from == "subject_alternative_name":
        wanted = SAN_TYPES[san_type]
        names = peer_cert.get("subjectAltName", ())
        for kind, value in names if isinstance(names, tuple) else ():
            if kind == wanted:
                return str(value)
        return None
    subject = peer_cert.get("subject", ())
    if not isinstance(subject, tuple):
        return None
    for relative_name in subject:
        for key, value in relative_name:
            if key == "commonName":
                return str(value)
    return None
