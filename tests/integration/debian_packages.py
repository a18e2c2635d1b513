"""Installing a Debian package a test suite needs, when it is missing and we may.

As root with apt-get (a CI container), the package is installed; otherwise the
tests fail saying what to install. They never skip: a CI run that skipped them
would pass without testing what they test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable

import pytest

APT_TIMEOUT_S = 900


def ensure_debian_package(present: Callable[[], bool], package: str, needed_by: str) -> None:
    """`present()` after installing `package` if needed; else fail naming the package."""
    if present():
        return
    if hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for command in (["apt-get", "update"], ["apt-get", "install", "-y", package]):
            done = subprocess.run(command, capture_output=True, text=True, env=env,
                                  check=False, timeout=APT_TIMEOUT_S)
            if done.returncode != 0:
                pytest.fail(f"installing {package} for {needed_by} failed: "
                            f"{' '.join(command)}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
        if present():
            return
    pytest.fail(f"{needed_by} need the Debian package {package}; install it, e.g. "
                f"`apt-get install -y {package}`")
