import os
import subprocess
import sys
from pathlib import Path

import pytest

from segments.errors import DataDirLockedError
from segments.filesystem import RealFileSystem, write_file_atomically


def test_append_parts_writes_back_to_back_and_tracks_size(tmp_path: Path) -> None:
    fs = RealFileSystem()
    handle = fs.open(str(tmp_path / "f"))
    handle.append(b"head")
    handle.append_parts([b"a" * 5000, b"", b"b" * 3, bytes(range(256)) * 10])
    assert handle.size() == 4 + 5000 + 3 + 2560 == os.path.getsize(tmp_path / "f")
    assert handle.read_at(4 + 4998, 5) == b"aabbb"
    many = [bytes([i % 256]) for i in range(3000)]  # more parts than IOV_MAX
    handle.append_parts(many)
    assert handle.read_at(handle.size() - 3000, 3000) == b"".join(many)
    handle.truncate(4)
    handle.sync()
    assert handle.read_at(0, 100) == b"head"
    handle.close()


def test_write_file_atomically_replaces_and_cleans_a_stale_temporary(tmp_path: Path) -> None:
    fs = RealFileSystem()
    target = str(tmp_path / "snapshot")
    Path(target + ".tmp").write_bytes(b"half-written garbage")
    write_file_atomically(fs, target, b"one")
    write_file_atomically(fs, target, b"two")
    assert Path(target).read_bytes() == b"two"
    assert not fs.exists(target + ".tmp")
    assert fs.listdir(str(tmp_path)) == ["snapshot"]


def test_directory_lock_is_exclusive_across_processes(tmp_path: Path) -> None:
    fs = RealFileSystem()
    lock = fs.lock_dir(str(tmp_path))
    with pytest.raises(DataDirLockedError, match="locked by another process"):
        fs.lock_dir(str(tmp_path))
    probe = (
        "import sys\n"
        "from segments.filesystem import RealFileSystem\n"
        "from segments.errors import DataDirLockedError\n"
        "try:\n"
        f"    RealFileSystem().lock_dir({str(tmp_path)!r})\n"
        "except DataDirLockedError:\n"
        "    sys.exit(3)\n"
    )
    assert subprocess.run([sys.executable, "-c", probe], timeout=60).returncode == 3
    lock.release()
    assert subprocess.run([sys.executable, "-c", probe], timeout=60).returncode == 0
