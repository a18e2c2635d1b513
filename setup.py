"""The optional C encoder of record columns; everything else is in pyproject.toml.

`optional=True`: without a C compiler the install still succeeds and
`segments.record_columns` encodes in Python (see its docstring).
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
    ],
)
