import base64
import os
import stat
from pathlib import Path

import pytest

from replication.transport.cluster_secret import ClusterSecretError, load_or_create_secret


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_missing_file_is_created_owner_only_with_32_random_bytes(tmp_path: Path) -> None:
    path = tmp_path / "cluster.secret"
    old_umask = os.umask(0)  # the file must be 0600 whatever the umask
    try:
        secret = load_or_create_secret(str(path))
    finally:
        os.umask(old_umask)
    assert mode_of(path) == 0o600
    assert path.read_bytes() == secret + b"\n"
    assert len(base64.urlsafe_b64decode(secret)) == 32
    assert [p.name for p in tmp_path.iterdir()] == ["cluster.secret"]  # no temporary left


def test_the_file_is_reread_identically(tmp_path: Path) -> None:
    path = str(tmp_path / "cluster.secret")
    first = load_or_create_secret(path)
    assert load_or_create_secret(path) == first
    assert load_or_create_secret(str(tmp_path / "other.secret")) != first


def test_an_existing_secret_is_stripped_of_whitespace(tmp_path: Path) -> None:
    path = tmp_path / "cluster.secret"
    path.write_bytes(b"  copied-from-another-node \n")
    path.chmod(0o400)
    assert load_or_create_secret(str(path)) == b"copied-from-another-node"


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660, 0o644, 0o620])
def test_loose_permissions_are_refused(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "cluster.secret"
    path.write_bytes(b"secret")
    path.chmod(mode)
    with pytest.raises(ClusterSecretError, match=f"owner only .*mode is {mode:04o}"):
        load_or_create_secret(str(path))


@pytest.mark.parametrize("content", [b"", b" \n\t\n"])
def test_an_empty_secret_is_refused(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "cluster.secret"
    path.write_bytes(content)
    path.chmod(0o600)
    with pytest.raises(ClusterSecretError, match="is empty"):
        load_or_create_secret(str(path))


def test_unusable_paths_are_reported(tmp_path: Path) -> None:
    with pytest.raises(ClusterSecretError, match="cannot create"):
        load_or_create_secret(str(tmp_path / "missing-dir" / "cluster.secret"))
    directory = tmp_path / "a-directory"
    directory.mkdir(mode=0o700)
    with pytest.raises(ClusterSecretError, match="not a regular file"):
        load_or_create_secret(str(directory))
