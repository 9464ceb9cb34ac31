#!/usr/bin/env python3
"""Fails on an #include that points up the layer order of docs/architecture.md.

Every file of src/ and include/sluice/ belongs to a layer (by folder, or by public header name);
a file may include headers of its own layer or of layers below it. A layer's per-backend folder
(src/<layer>/<backend>/) may also include that backend's runtime (src/backends/<backend>/), and
nothing else may include a backend's private headers. Run from anywhere:

    tests/layering/check_layers.py [repository root]
"""
import pathlib
import re
import sys

# Lowest first. A layer may include its own headers and those of lower ranks.
RANK = {
    "contract": 0,  # what a backend implements and needs: errors, devices, the Backend interface
    "backend": 1,   # a backend's runtime: src/backends/<name>/
    "platform": 2,  # backend registry and plugin loading, device queries
    "core": 3,      # contexts, events, the extension registry, the access vocabulary
    "deps": 4,
    "memory": 5,
    "scalar": 6,
    "kernel": 6,
    "graph": 7,     # conditional nodes take Managed values
    "dataflow": 8,
    "la": 8,
    "lazy": 8,
    "dist": 9,
}

# Public headers of include/sluice/ by layer (dataflow/ and scalar/ are their layers' folders;
# private ones, detail/<layer>_*.hpp, belong to the layer their name starts with).
PUBLIC = {
    "error.hpp": "contract", "platform.hpp": "contract", "backend.hpp": "contract",
    "host.hpp": "contract", "ext/plugin.hpp": "contract", "ext/graph_ir.hpp": "contract",
    "ext/graph_batches.hpp": "contract",
    "access.hpp": "contract",  # the IR's nodes declare their accesses
    "ext/plugin_abi_tag.hpp": "contract",  # generated into the build tree
    "context.hpp": "core", "event.hpp": "core", "cuda.hpp": "core",
    "extension.hpp": "core", "observe.hpp": "core",
    "deps.hpp": "deps",
    "memory.hpp": "memory", "ext/fill.hpp": "memory",
    "scalar.hpp": "scalar", "ext/scalar_kernels.hpp": "scalar",
    "kernel.hpp": "kernel", "canned.hpp": "kernel", "blas.hpp": "kernel", "rng.hpp": "kernel",
    "fft.hpp": "kernel", "ext/canned.hpp": "kernel", "ext/kernel_loader.hpp": "kernel",
    "graph.hpp": "graph",
    "dataflow.hpp": "dataflow", "dataflow_cuda.cuh": "dataflow",
    "la.hpp": "la", "ext/la_kernels.hpp": "la",
    "lazy.hpp": "lazy", "ext/lazy_kernels.hpp": "lazy",
    "dist.hpp": "dist", "ext/dist.hpp": "dist",
    "sluice.hpp": "dist",  # the umbrella header includes everything
}
# src/ folders by layer.
SRC = {
    "core": "core", "deps": "deps", "memory": "memory", "scalar": "scalar", "kernel": "kernel",
    "graph": "graph", "dataflow": "dataflow", "la": "la", "lazy": "lazy", "dist": "dist",
}
# Edges known to point the wrong way, each with the issue that removes it. Listed edges still
# print, as "pending"; an edge not listed fails the test.
PENDING = {}
BACKENDS = {"host", "cuda"}
# Files of the core that are the platform layer (the rest of src/core is contexts and events).
PLATFORM_FILES = {"platform.cpp", "registry.cpp", "registry.hpp", "error.cpp", "backend.cpp",
                  "plugin_loader.cpp", "plugin_loader.hpp", "builtin_backends.hpp"}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def public_layer(rel):
    """Layer of a header under include/sluice/, given relative to it."""
    if rel in PUBLIC:
        return PUBLIC[rel]
    first, _, rest = rel.partition("/")
    if first in ("dataflow", "scalar"):
        return first
    if first == "detail":
        layer = rest.split("_", 1)[0]
        return layer if layer in RANK else None
    return None


def src_layer(rel):
    """(layer, backend) of a file under src/, given relative to it; backend for per-backend code."""
    parts = rel.split("/")
    if parts[0] == "backends":
        return "backend", parts[1]
    layer = SRC.get(parts[0])
    if layer == "core" and parts[-1] in PLATFORM_FILES:
        layer = "platform"
    backend = parts[1] if len(parts) > 2 and parts[1] in BACKENDS else None
    return layer, backend


def allowed(from_layer, to_layer):
    if from_layer == to_layer:
        return True
    return RANK[to_layer] < RANK[from_layer]


def main(root):
    root = pathlib.Path(root).resolve()
    problems = []
    pending = []
    checked = 0

    def report(where, target, message):
        key = (where, target)
        if key in PENDING:
            pending.append(f"pending ({PENDING[key]}): {message}")
        else:
            problems.append(message)
    files = [p for p in (root / "src").rglob("*") if p.suffix in (".cpp", ".hpp", ".cu", ".cuh", ".h")]
    files += [p for p in (root / "include/sluice").rglob("*") if p.suffix in (".hpp", ".cuh", ".h")]
    for path in sorted(files):
        if path.is_relative_to(root / "src"):
            rel = path.relative_to(root / "src").as_posix()
            layer, backend = src_layer(rel)
            where = "src/" + rel
        else:
            rel = path.relative_to(root / "include/sluice").as_posix()
            layer, backend = public_layer(rel), None
            where = "include/sluice/" + rel
        if layer is None:
            problems.append(f"{where}: belongs to no layer; add its folder to tests/layering/check_layers.py")
            continue
        for target in INCLUDE.findall(path.read_text(errors="replace")):
            checked += 1
            if target.startswith("sluice/"):
                to = public_layer(target[len("sluice/"):])
                if to is None:
                    problems.append(f"{where}: includes {target}, which belongs to no layer")
                elif not allowed(layer, to):
                    report(where, target, f"{where} ({layer}) includes {target} ({to}): points up the layer order")
                continue
            parts = target.split("/")
            if parts[0] == "backends":
                if layer == "backend" and backend_of(where) == parts[1]:
                    continue
                if backend == parts[1]:
                    continue  # a layer's per-backend folder uses that backend's runtime
                report(where, target, f"{where}: includes {target}, a backend's private header "
                                      f"(only src/backends/{parts[1]}/ and src/<layer>/{parts[1]}/ may)")
                continue
            to, _ = src_layer(target)
            if to is None:
                # a header beside the file, included by a relative path
                continue
            if parts[0] == "core" and parts[-1] in PLATFORM_FILES:
                to = "platform"
            if not allowed(layer, to):
                report(where, target, f"{where} ({layer}) includes {target} ({to}): points up the layer order")
    for p in pending:
        print(p)
    for p in problems:
        print(p)
    print(f"checked {checked} includes of {len(files)} files: {len(problems)} problem(s)")
    return 1 if problems else 0


def backend_of(where):
    parts = where.split("/")
    return parts[2] if len(parts) > 2 and parts[1] == "backends" else None


def self_test():
    """The checker itself: a tree with one upward edge and one private backend header fails."""
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        t = pathlib.Path(tmp)
        for rel, text in {
            "include/sluice/deps.hpp": '#include "sluice/access.hpp"\n',
            "include/sluice/access.hpp": "",
            "src/deps/tracker.cpp": '#include "la/la_common.hpp"\n',
            "src/la/la_common.hpp": '#include "deps/tracker.hpp"\n',
            "src/la/vec.cpp": '#include "backends/cuda/cuda_stream.hpp"\n',
            "src/la/cuda/kernels.cu": '#include "backends/cuda/cuda_stream.hpp"\n',
            "src/backends/cuda/cuda_stream.hpp": '#include "sluice/backend.hpp"\n',
            "include/sluice/backend.hpp": "",
        }.items():
            (t / rel).parent.mkdir(parents=True, exist_ok=True)
            (t / rel).write_text(text)
        import contextlib
        import io
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = main(t)
        text = out.getvalue()
        ok = (rc == 1 and "src/deps/tracker.cpp (deps) includes la/la_common.hpp" in text
              and "src/la/vec.cpp: includes backends/cuda/cuda_stream.hpp" in text
              and "kernels.cu" not in text and "2 problem(s)" in text)
        print("self-test:", "ok" if ok else "FAILED\n" + text)
        return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--self-test":
        sys.exit(self_test())
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parents[2]))
