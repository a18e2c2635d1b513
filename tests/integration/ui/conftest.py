"""A browser for the management UI's tests: Debian's Chromium driven by Playwright.

Playwright cannot download its own browsers here, so it is pointed at
`/usr/bin/chromium`, installed when missing and run as root (the mechanism the
Spark tests use for Java). Screenshots go to `test-artifacts/ui/` (or
`$LOGBROKER_TEST_ARTIFACTS/ui/`), which git ignores: one per test at its end,
plus any a test takes on the way.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from tests.integration.debian_packages import ensure_debian_package

CHROMIUM = Path("/usr/bin/chromium")
ROOT = Path(__file__).resolve().parents[3]
VIEWPORT = {"width": 1280, "height": 800}
STEP_TIMEOUT_MS = 10_000  # any one wait in a page: a selector, a click, a navigation


def artifacts_dir() -> Path:
    base = Path(os.environ.get("LOGBROKER_TEST_ARTIFACTS", ROOT / "test-artifacts"))
    path = base / "ui"
    path.mkdir(parents=True, exist_ok=True)
    return path


def screenshot(page: Page, name: str) -> Path:
    path = artifacts_dir() / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', name)}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


@pytest.fixture(scope="session")
def chromium() -> Path:
    ensure_debian_package(CHROMIUM.exists, "chromium", "the management UI's browser tests")
    return CHROMIUM


@pytest.fixture(scope="module")
def browser(chromium: Path) -> Iterator[Browser]:
    # Per module, not per session: while Playwright's sync API is open, the thread has a
    # running event loop, and pytest-asyncio cannot run the async tests that follow.
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(chromium))
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    """A fresh browser context (its own sessionStorage) at 1280x800; its last state is
    saved as a screenshot named after the test."""
    context = browser.new_context(viewport=VIEWPORT)  # type: ignore[arg-type]
    context.set_default_timeout(STEP_TIMEOUT_MS)
    opened = context.new_page()
    try:
        yield opened
    finally:
        try:
            screenshot(opened, request.node.name)
        finally:
            context.close()


def log_in(page: Page, base_url: str, user: str, password: str, route: str = "",
           refresh_ms: int | None = None) -> None:
    """Open the UI at `route` (a hash such as `#/queues`) and submit the login form."""
    query = f"?refresh_ms={refresh_ms}" if refresh_ms else ""
    page.goto(f"{base_url}/{query}{route}")
    page.fill("#login input[name=user]", user)
    page.fill("#login input[name=password]", password)
    page.click("#login button[type=submit]")
