"""Shared fixtures of the sluice pytest suite.

Every semantic test runs on the host backend here, and on cuda too where a GPU is present
(`backend` is parametrized over the backends that have devices; a missing one reports as
skipped with the reason, never as passed). GPU-library tests (CuPy, PyTorch, JAX) skip with the
reason when the library or a GPU is missing. SLUICE_REQUIRE_CUDA=1 (scripts/gpu-python) makes a
missing cuda device an error instead.
"""

import importlib
import os
import subprocess
import sys
import textwrap

import pytest

import sluice

# JAX takes 75 % of a GPU's memory when first used unless told not to; the other libraries and
# sluice share the GPU with it in this process.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

HERE = os.path.dirname(os.path.abspath(__file__))
MATRIX_DIR = os.environ.get(
    "SLUICE_MATRIX_DIR", os.path.join(HERE, "..", "..", "..", "shared", "data", "matrices")
)


def _cuda_reason():
    for b in sluice.backends():
        if b.name == "cuda":
            return None if b.device_count > 0 else f"no cuda device: {b.unavailable_reason}"
    return "sluice was built without the cuda backend"


CUDA_REASON = _cuda_reason()


def pytest_configure(config):
    # On the GPU machine (scripts/gpu-python) a missing cuda device is a failure, not a skip.
    if os.environ.get("SLUICE_REQUIRE_CUDA") == "1" and CUDA_REASON is not None:
        raise pytest.UsageError(f"SLUICE_REQUIRE_CUDA=1 but {CUDA_REASON}")

requires_cuda = pytest.mark.skipif(CUDA_REASON is not None, reason=CUDA_REASON or "")


@pytest.fixture(params=["host", "cuda"])
def backend(request):
    """Each backend that has devices; cuda reports skipped with the reason where it has none."""
    if request.param == "cuda" and CUDA_REASON is not None:
        pytest.skip(CUDA_REASON)
    return request.param


@pytest.fixture
def device(backend):
    return sluice.Device(backend, 0)


@pytest.fixture
def ctx(device):
    c = sluice.Context(device, name="test")
    yield c
    try:
        c.synchronize()
    except sluice.WorkFailed:
        pass


def gpu_library(name):
    """Imports a GPU array library, or skips with the reason."""
    if CUDA_REASON is not None:
        pytest.skip(CUDA_REASON)
    try:
        return importlib.import_module(name)
    except Exception as e:  # ImportError, or a library that fails to initialize
        pytest.skip(f"{name} is not usable here: {type(e).__name__}: {e}")


def run_isolated(code, timeout=60):
    """Runs `code` in a fresh interpreter with this sluice on its path; fails the test (instead
    of hanging the suite) if it does not finish within `timeout` seconds. Returns its standard output and error."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    try:
        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"did not finish in {timeout} s (a deadlock?); output so far:\n{e.stdout}\n{e.stderr}")
    if done.returncode != 0:
        pytest.fail(f"exit status {done.returncode}\n{done.stdout}\n{done.stderr}")
    return done.stdout + done.stderr
