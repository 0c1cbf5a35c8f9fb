"""The optional C extension, which pyproject.toml cannot yet declare outside an experimental table.

The prompt-attack classifier's lexical stage (extproc/models/_lexical_kernel.c): a few
microseconds a prompt instead of ~20 on numpy. `optional`: without a C compiler the install
goes on and the numpy path serves.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "extproc.models._lexical_kernel",
            sources=["extproc/models/_lexical_kernel.c"],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ]
)
