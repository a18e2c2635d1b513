"""Test-wide settings.

Under CI (the CI environment variable is set) hypothesis runs derandomized: the
same examples every run, so main stays green unless the code changes. Local runs
explore new examples each time and remember failures in `.hypothesis/`.
"""

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("dev", print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "dev")
