"""`client_tls_context`: how the client checks an https:// broker and proves who it is.

Without options, an https:// node is checked against the system's CAs, as
browsers and httpx do. `ca_file` trusts a private CA instead (a broker whose
certificate your own CA signed); `cert_file` and `key_file` present a client
certificate (a broker with `--tls-verify peer --tls-fail-if-no-peer-cert`). The
same context serves HTTPS requests and WSS streams. The CLI reads them from
`--ca-file` / `--cert-file` / `--key-file` or LOGBROKER_CA_FILE /
LOGBROKER_CERT_FILE / LOGBROKER_KEY_FILE.
"""

from __future__ import annotations

import ssl

from api.client.errors import InvalidUrl

__all__ = ["client_tls_context"]


def client_tls_context(ca_file: str | None = None, cert_file: str | None = None,
                       key_file: str | None = None) -> ssl.SSLContext | None:
    """None when no option is given (the default checks: system CAs, no certificate)."""
    if not (ca_file or cert_file or key_file):
        return None
    if key_file and not cert_file:
        raise InvalidUrl("a client key (--key-file) needs its certificate (--cert-file)")
    try:
        context = ssl.create_default_context(cafile=ca_file or None)
        if cert_file:
            context.load_cert_chain(cert_file, key_file or None)
    except (OSError, ssl.SSLError) as error:
        raise InvalidUrl(f"TLS files: {error}") from error
    return context
