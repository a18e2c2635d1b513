"""The optional C extensions; everything else is in pyproject.toml.

`optional=True`: without a C compiler the install still succeeds,
`segments.record_columns` encodes in Python (see its docstring) and the group
committer fsyncs on a Python thread (`logbroker/queue/native_fsync.py`).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "segments._record_columns",
            ["segments/_record_columns.c", "segments/_crc32c_copy.c"],
            depends=["segments/_crc32c_copy.h"],
            optional=True,
        ),
        Extension(
            "logbroker.queue._fsync_thread",
            ["logbroker/queue/_fsync_thread.c"],
            optional=True,
        ),
    ],
)
