"""The type stubs (sluice/*.pyi) agree with the module: mypy's stubtest, where installed."""

import os
import shutil
import subprocess
import sys

import pytest

import sluice

# What stubtest reports for every pybind11 class, whatever the stubs say.
NOISE = ("metaclass differs", 'does not have *args argument "args"')


def test_stubs_match_the_module():
    stubtest = shutil.which("stubtest")
    if stubtest is None:
        pytest.skip("mypy's stubtest is not installed (Debian: apt-get install mypy)")
    package = os.path.dirname(sluice.__file__)
    if not os.path.exists(os.path.join(package, "__init__.pyi")):
        pytest.skip(f"{package} holds no stubs")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(package))
    done = subprocess.run([sys.executable, stubtest, "sluice", "--ignore-missing-stub"],
                          capture_output=True, text=True, env=env, timeout=300)
    errors = [line for line in done.stdout.splitlines()
              if line.startswith("error:") and not any(n in line for n in NOISE)]
    assert not errors, "\n".join(errors)
