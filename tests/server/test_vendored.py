"""The web page's vendored JavaScript ships in the package, each library with its licence beside it.

Issue 11 section 4: no CDN and no network at run time; the libraries come
from npm at development time (static/vendor/README.md says which and how).
"""

from __future__ import annotations

import hashlib
import re
from importlib.resources import files
from importlib.resources.abc import Traversable

import pytest

VENDOR = files("agentkernel.server") / "static" / "vendor"

# the browser build, the global it sets, and the licence files beside it
LIBRARIES = {
    "marked": ("marked.umd.js", "marked", ("LICENSE",)),
    "dompurify": ("purify.min.js", "DOMPurify", ("LICENSE", "LICENSE-MPL")),
}


def listed_digests() -> dict[str, str]:
    """The README's `sha256  path` lines."""
    text = (VENDOR / "README.md").read_text(encoding="utf-8")
    return {path: digest for digest, path in re.findall(r"^([0-9a-f]{64})  (\S+)$", text, re.MULTILINE)}


@pytest.mark.parametrize("library", sorted(LIBRARIES))
def test_each_library_is_in_the_installed_package_with_its_licence(library: str) -> None:
    script, global_name, licences = LIBRARIES[library]
    folder: Traversable = VENDOR / library
    source = (folder / script).read_text(encoding="utf-8")
    assert len(source) > 10_000 and global_name in source
    for licence in licences:
        text = (folder / licence).read_text(encoding="utf-8")
        assert "License" in text or "LICENSE" in text


def test_the_readme_names_every_file_and_its_digest() -> None:
    """A library updated without its README (version, digests) is caught here."""
    digests = listed_digests()
    shipped = {
        f"{folder.name}/{item.name}"
        for folder in VENDOR.iterdir()
        if folder.is_dir()
        for item in folder.iterdir()
    }
    assert shipped == set(digests)
    for path, digest in digests.items():
        library, name = path.split("/")
        assert hashlib.sha256((VENDOR / library / name).read_bytes()).hexdigest() == digest, path
