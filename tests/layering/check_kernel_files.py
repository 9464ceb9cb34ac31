#!/usr/bin/env python3
"""Fails on a .cu file of src/ whose kernels the cuda module cannot load ahead.

Where one process drives several GPUs, the NCCL engine loads every kernel of the module on each
device before any NCCL kernel runs (src/backends/cuda/kernel_preload.hpp): a .cu file takes part
by naming one of its __global__ functions, once, with SLUICE_CUDA_KERNEL_FILE(anchor), and all
of its module's functions are loaded with it. A file that does not register would have its
kernels loaded at their first launch, which may wait for a running NCCL kernel (a hang). This
check finds, for every .cu file under src/: exactly one registration, whose anchor is a
__global__ function defined in the file or in a header of src/ it includes. Run from anywhere:

    tests/layering/check_kernel_files.py [repository root]
"""
import pathlib
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
REGISTER = re.compile(r'^\s*SLUICE_CUDA_KERNEL_FILE\(\s*([A-Za-z_]\w*)', re.M)


def translation_unit(path, src, seen=None):
    """The text of `path` and of the headers of src/ it includes, transitively."""
    seen = set() if seen is None else seen
    if path in seen or not path.is_file():
        return ""
    seen.add(path)
    text = path.read_text(errors="replace")
    parts = [text]
    for inc in INCLUDE.findall(text):
        for base in (src, path.parent):
            if (base / inc).is_file():
                parts.append(translation_unit(base / inc, src, seen))
                break
    return "\n".join(parts)


def main(root):
    root = pathlib.Path(root)
    src = root / "src"
    problems = []
    files = sorted(src.rglob("*.cu"))
    for cu in files:
        rel = cu.relative_to(root).as_posix()
        anchors = REGISTER.findall(cu.read_text(errors="replace"))
        if not anchors:
            problems.append(f"{rel}: no SLUICE_CUDA_KERNEL_FILE(anchor): its kernels would load "
                            "at their first launch (see src/backends/cuda/kernel_preload.hpp)")
            continue
        if len(anchors) > 1:
            problems.append(f"{rel}: SLUICE_CUDA_KERNEL_FILE {len(anchors)} times; once names "
                            "the whole file")
            continue
        name = anchors[0]
        kernel = re.compile(r"__global__[^;{}]*?\b" + re.escape(name) + r"\s*\(", re.S)
        if not kernel.search(translation_unit(cu, src)):
            problems.append(f"{rel}: SLUICE_CUDA_KERNEL_FILE({name}): no __global__ function "
                            f"{name} in the file or the headers it includes")
    for p in problems:
        print(p)
    print(f"{len(files)} .cu file(s), {len(problems)} problem(s)")
    return 1 if problems else 0


def self_test():
    """The checker itself: a file without registration, one registered twice and one whose anchor
    is no kernel of it fail; a file whose kernel lives in an included header passes."""
    import contextlib
    import io
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        t = pathlib.Path(tmp)
        for rel, text in {
            "src/la/cuda/good.cu": '#include "la/cuda/k.cuh"\nSLUICE_CUDA_KERNEL_FILE(k<1>);\n',
            "src/la/cuda/k.cuh": "template <int N>\n__global__ void __launch_bounds__(64)\n"
                                 "    k(int* x) {}\n",
            "src/dist/cuda/missing.cu": "__global__ void f(int* x) {}\n",
            "src/memory/cuda/twice.cu": "__global__ void f(int* x) {}\n"
                                        "SLUICE_CUDA_KERNEL_FILE(f);\nSLUICE_CUDA_KERNEL_FILE(f);\n",
            "src/kernel/cuda/wrong.cu": "void g(int* x) {}\n__global__ void f(int* x) {}\n"
                                        "SLUICE_CUDA_KERNEL_FILE(g);\n",
        }.items():
            (t / rel).parent.mkdir(parents=True, exist_ok=True)
            (t / rel).write_text(text)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = main(t)
        text = out.getvalue()
        ok = (rc == 1 and "src/dist/cuda/missing.cu: no SLUICE_CUDA_KERNEL_FILE" in text
              and "src/memory/cuda/twice.cu: SLUICE_CUDA_KERNEL_FILE 2 times" in text
              and "src/kernel/cuda/wrong.cu: SLUICE_CUDA_KERNEL_FILE(g): no __global__" in text
              and "good.cu" not in text and "4 .cu file(s), 3 problem(s)" in text)
        print("self-test:", "ok" if ok else "FAILED\n" + text)
        return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--self-test":
        sys.exit(self_test())
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parents[2]))
