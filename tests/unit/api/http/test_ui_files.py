"""The management UI's files: shipped with the package, loading nothing from another host,
and every module they import is there (a missing one is a blank page, not an error)."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path

from api.http.routes.ui import UI_DIR

ROOT = Path(__file__).resolve().parents[4]
# An XML namespace name, not something fetched.
NOT_FETCHED = {"http://www.w3.org/2000/svg"}
IMPORT = re.compile(r"""(?:from\s+|import\s*\(\s*|import\s+)['"]([^'"]+)['"]""")


def ui_files() -> list[Path]:
    return sorted(path for path in UI_DIR.rglob("*") if path.is_file())


def test_every_ui_file_is_package_data() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = project["tool"]["setuptools"]["package-data"]["api.http"]
    package_dir = UI_DIR.parent
    for path in ui_files():
        relative = path.relative_to(package_dir).as_posix()
        assert any(fnmatch.fnmatch(relative, pattern) for pattern in patterns), relative


def test_nothing_is_loaded_from_another_host() -> None:
    for path in ui_files():
        urls = set(re.findall(r"https?://[^\s'\"`)]+", path.read_text())) - NOT_FETCHED
        assert not urls, f"{path.name} refers to {sorted(urls)}"
        assert "//cdn" not in path.read_text(), path.name


def test_every_imported_module_exists() -> None:
    modules = [path for path in ui_files() if path.suffix == ".js"]
    assert (UI_DIR / "app.js") in modules
    for module in modules:
        for target in IMPORT.findall(module.read_text()):
            resolved = (UI_DIR / target.removeprefix("/ui/") if target.startswith("/ui/")
                        else module.parent / target).resolve()
            assert target.startswith(("./", "../", "/ui/")), f"{module.name}: {target}"
            assert resolved.is_file(), f"{module.name} imports {target}: missing"
    page = (UI_DIR / "index.html").read_text()
    for target in re.findall(r'(?:src|href)="(/ui/[^"]+)"', page):
        assert (UI_DIR / target.removeprefix("/ui/")).is_file(), target
