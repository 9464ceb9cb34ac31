"""Builds the Python package `sluice` with this repository's CMake project (see pyproject.toml).

The module is the CMake target `sluice_python`, configured for the interpreter that runs this
script; tests, benchmarks, tools and examples are left out. Environment knobs: SLUICE_CMAKE_ARGS
(extra arguments for the configure step, e.g. "-DSLUICE_CUDA=OFF"), SLUICE_BUILD_JOBS (default:
the CPU count), CMAKE_CXX_COMPILER_LAUNCHER (e.g. ccache, as CMake reads it).
"""

import os
import pathlib
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).parent.resolve()


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = pathlib.Path(self.build_temp).resolve() / "cmake"
        build.mkdir(parents=True, exist_ok=True)
        configure = [
            "cmake", "-S", str(ROOT), "-B", str(build),
            "-DCMAKE_BUILD_TYPE=Release",
            f"-DPython3_EXECUTABLE={sys.executable}",
            "-DSLUICE_PYTHON=ON",
            "-DSLUICE_BUILD_TESTS=OFF",
            "-DSLUICE_BUILD_BENCHMARKS=OFF",
            "-DSLUICE_BUILD_TOOLS=OFF",
            "-DSLUICE_BUILD_EXAMPLES=OFF",
        ]
        if shutil.which("ninja") and not (build / "CMakeCache.txt").exists():
            configure += ["-G", "Ninja"]
        configure += shlex.split(os.environ.get("SLUICE_CMAKE_ARGS", ""))
        subprocess.check_call(configure)
        jobs = os.environ.get("SLUICE_BUILD_JOBS", str(os.cpu_count() or 2))
        subprocess.check_call(
            ["cmake", "--build", str(build), "--target", "sluice_python", "-j", jobs])
        built = sorted((build / "python" / "sluice").glob("_sluice*.so"))
        if not built:
            raise RuntimeError(f"the build made no module in {build / 'python' / 'sluice'}")
        target = pathlib.Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built[-1], target)


setup(
    package_dir={"": "python"},
    packages=["sluice", "sluice.lazy"],
    package_data={"sluice": ["py.typed", "*.pyi"], "sluice.lazy": ["*.pyi"]},
    ext_modules=[CMakeExtension("sluice._sluice")],
    cmdclass={"build_ext": CMakeBuild},
    zip_safe=False,
)
