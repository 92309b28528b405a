from __future__ import annotations

import re
import subprocess
import sys

import penguin_harness


def test_package_exposes_its_version() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+", penguin_harness.__version__)


def test_package_imports_in_a_fresh_interpreter() -> None:
    out = subprocess.run(
        [sys.executable, "-c", "import penguin_harness; print(penguin_harness.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == penguin_harness.__version__
