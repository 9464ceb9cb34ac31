#!/usr/bin/env python3
"""Compiles every ```cpp block of README.md and docs/*.md as a translation unit of its own.

A block that includes nothing gets `#include <sluice/sluice.hpp>` in front; otherwise it must be
complete as written (declarations at namespace scope, statements inside functions). Blocks with
CUDA code (`__global__`, `<<<`, `sluice/dataflow_cuda.cuh`) are compiled by nvcc when one is
given, else reported as not compiled (and the run fails, unless --allow-missing-nvcc). The
flags are a user's strict ones, so the public headers stay warning-free for them too.

    compile_doc_blocks.py ROOT CXX [--nvcc NVCC] [--allow-missing-nvcc]
"""
import argparse
import concurrent.futures
import pathlib
import re
import subprocess
import sys
import tempfile

BLOCK = re.compile(r"^```cpp[^\n]*\n(.*?)^```", re.M | re.S)
# String literals, raw ones first: CUDA source held in a string for NVRTC is not CUDA code of
# the block (nvcc takes about five times as long as g++ -fsyntax-only on a block).
STRINGS = re.compile(r'R"([^(\s]*)\((.*?)\)\1"|"(?:[^"\\\n]|\\.)*"', re.S)


def is_cuda(code):
    bare = STRINGS.sub('""', code)
    return "dataflow_cuda.cuh" in code or "__global__" in bare or "<<<" in bare


def blocks(root):
    files = [root / "README.md"] + sorted((root / "docs").rglob("*.md"))
    for f in files:
        text = f.read_text()
        for m in BLOCK.finditer(text):
            line = text.count("\n", 0, m.start()) + 2
            yield f.relative_to(root), line, m.group(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("cxx")
    ap.add_argument("--nvcc")
    ap.add_argument("--allow-missing-nvcc", action="store_true")
    args = ap.parse_args()
    root = pathlib.Path(args.root).resolve()
    failed, skipped, ok = [], [], 0
    jobs = []  # (where, command): run two at a time below
    with tempfile.TemporaryDirectory() as tmp:
        for i, (path, line, code) in enumerate(blocks(root)):
            if "#include" not in code:
                code = "#include <sluice/sluice.hpp>\n" + code
            cuda = is_cuda(code)
            src = pathlib.Path(tmp) / (f"block{i}.cu" if cuda else f"block{i}.cpp")
            src.write_text(f'#line {line} "{path}"\n' + code)
            if cuda:
                if not args.nvcc:
                    skipped.append(f"{path}:{line}")
                    continue
                # PTX only (no ptxas): the blocks are checked as source, not as machine code.
                cmd = [args.nvcc, "-std=c++20", "--extended-lambda", "-arch=compute_90", "-x",
                       "cu", "-c", "-o", str(src.with_suffix(".o")), f"-I{root / 'include'}",
                       "-Xcompiler=-Wall,-Wextra,-Werror", str(src)]
            else:
                cmd = [args.cxx, "-std=c++20", "-fsyntax-only", "-Wall", "-Wextra", "-Werror",
                       "-Wno-unused-variable", "-Wno-unused-but-set-variable",
                       f"-I{root / 'include'}", str(src)]
            jobs.append((f"{path}:{line}", cmd))

        def run(job):
            return job[0], subprocess.run(job[1], capture_output=True, text=True)

        # The nvcc blocks take most of the time; two at a time (the CI machine's cores).
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            for where, r in pool.map(run, jobs):
                if r.returncode != 0:
                    failed.append(f"{where}\n{r.stderr.strip()}")
                else:
                    ok += 1
    for f in failed:
        print("FAILED", f, "\n")
    for s in skipped:
        print("not compiled (no nvcc):", s)
    print(f"{ok} C++ blocks of the docs compiled, {len(failed)} failed, {len(skipped)} not compiled")
    if failed or (skipped and not args.allow_missing_nvcc):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
