"""One build step pyproject.toml cannot say: the repository's top-level folders that the product
reads and runs (``hooks/``, ``hosts/``, ``installers/``) go into the built package, under
``memself/_shipped/``, where ``memself.shipped`` finds them in an installed wheel. An editable
install needs no copy: it runs from the source tree, where they sit beside the package."""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SHIPPED = ("hooks", "hosts", "installers")
ROOT = Path(__file__).resolve().parent


class BuildWithShipped(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        for name in SHIPPED:
            target = Path(self.build_lib) / "memself" / "_shipped" / name
            shutil.copytree(
                ROOT / name, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__")
            )


setup(cmdclass={"build_py": BuildWithShipped})
