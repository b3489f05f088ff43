"""The one part of agentkernel built from C: `agentkernel_quickjs`, the QuickJS engine and its Python
binding, vendored with a fix (vendor/quickjs/README.md says which and why). Everything else about
the package is declared in pyproject.toml."""

import sys

from setuptools import Extension, setup

ENGINE = "vendor/quickjs"
ENGINE_SOURCES = ["quickjs.c", "libregexp.c", "libunicode.c", "cutils.c", "dtoa.c"]


def _engine_version() -> str:
    with open(f"{ENGINE}/VERSION", encoding="ascii") as version:
        return version.read().strip()


# QuickJS needs GCC extensions (computed goto): GCC or Clang, never MSVC. No debug information: it is
# four fifths of the library's size.
compile_args = [
    "-std=gnu11",
    "-g0",
    "-Wno-unused-parameter",
    "-Wno-sign-compare",
    "-Wno-implicit-fallthrough",
]
link_args = [] if sys.platform == "darwin" else ["-lm", "-lpthread"]

setup(
    ext_modules=[
        Extension(
            "agentkernel_quickjs._quickjs",
            sources=["src/agentkernel_quickjs/_quickjs.c", *(f"{ENGINE}/{name}" for name in ENGINE_SOURCES)],
            include_dirs=[ENGINE],
            define_macros=[("_GNU_SOURCE", None), ("CONFIG_VERSION", f'"{_engine_version()}"')],
            extra_compile_args=compile_args,
            extra_link_args=link_args,
        )
    ]
)
