"""The cluster secret file, kept like RabbitMQ's Erlang cookie.

Every node of a cluster must hold the same secret; copy the file between
nodes. A missing file is created with 32 random bytes as URL-safe base64 text,
readable by its owner only. The file appears complete or not at all: it is
written under a temporary name (itself created with O_EXCL) and hard-linked
into place, which never replaces a file that another process created first.
An existing file is refused when it is empty or readable or writable by group
or others, as Erlang refuses a cookie with loose permissions.
"""

from __future__ import annotations

import base64
import os
import secrets
import stat

SECRET_RANDOM_BYTES = 32
_MODE = 0o600


class ClusterSecretError(Exception):
    """The cluster secret file cannot be used; the message says why and where."""


def load_or_create_secret(path: str) -> bytes:
    """The secret in `path` (surrounding whitespace stripped), creating the file if missing."""
    try:
        return _read(path)
    except FileNotFoundError:
        pass
    try:
        created = _create(path)
    except OSError as exc:
        raise ClusterSecretError(f"cannot create cluster secret file {path}: {exc}") from exc
    if created is not None:
        return created
    try:
        return _read(path)  # another process created it between our read and our link
    except FileNotFoundError as exc:
        raise ClusterSecretError(f"cluster secret file {path} vanished") from exc


def _read(path: str) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ClusterSecretError(f"cannot read cluster secret file {path}: {exc}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ClusterSecretError(f"cluster secret file {path} is not a regular file")
        mode = stat.S_IMODE(info.st_mode)
        if mode & 0o077:
            raise ClusterSecretError(
                f"cluster secret file {path} must be accessible by its owner only "
                f"(mode is {mode:04o}; run chmod 600 {path})"
            )
        with os.fdopen(os.dup(fd), "rb") as file:
            secret = file.read().strip()
    finally:
        os.close(fd)
    if not secret:
        raise ClusterSecretError(f"cluster secret file {path} is empty")
    return secret


def _create(path: str) -> bytes | None:
    """Writes a new secret to `path`; None when another process got there first."""
    secret = base64.urlsafe_b64encode(secrets.token_bytes(SECRET_RANDOM_BYTES))
    directory, name = os.path.split(os.path.abspath(path))
    temporary = os.path.join(directory, f".{name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _MODE)
    try:
        try:
            os.fchmod(fd, _MODE)  # the umask may only narrow the mode, but be explicit
            os.write(fd, secret + b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(temporary, path)  # atomic, and never replaces an existing file
        except FileExistsError:
            return None
    finally:
        os.unlink(temporary)
    _fsync_directory(directory)
    return secret


def _fsync_directory(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
