#!/usr/bin/env python3
"""The layer order of docs/architecture.md, enforced (ctest tools/layer_includes_test, label cpu): every #include in
src/<layer>/ names a header of its own layer or of one it links, directly or transitively.

The link graph is read from src/CMakeLists.txt (the sg_layer(...) calls, target_link_libraries of sg_<layer>, and the
CLI executable over src/cli/), the one place it is written. The compiler cannot enforce it: every layer has all of
src/ as include directory, so an upward include of a header-only definition compiles and links.

    python3 tests/tools/layer_includes_test.py [-v]
"""
from __future__ import annotations

import re
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE_SUFFIXES = {".h", ".cpp", ".cu", ".cuh"}

# Includes from src/ of a file in tests/, each allowed by name with why. Nothing else in src/ may include tests/.
ALLOWED_TEST_INCLUDES = {
    # Built with SG_SIMT_EMULATION only (a host test compiles the kernel source against a CPU emulator of the
    # warp primitives); the library's own build never reads it.
    ("kernels/warp_mma.cuh", "simt_emulator.h"),
}

_COMMAND = re.compile(r"\b([A-Za-z_]\w*)\s*\(([^)]*)\)")
_INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
_KEYWORDS = {"PUBLIC", "PRIVATE", "INTERFACE", "DEPS"}


def read_link_graph(cmake_file: Path) -> dict[str, set[str]]:
    """{layer: layers it links directly} from src/CMakeLists.txt. A layer is a folder of src/ built as sg_<layer>
    (sg_layer) or as an executable over a glob of src/<layer>/ (the CLI)."""
    text = "\n".join(line.split("#", 1)[0] for line in cmake_file.read_text().splitlines())
    calls = [(name, args.split()) for name, args in _COMMAND.findall(text)]
    layers: dict[str, set[str]] = {}
    target_layer: dict[str, str] = {}  # CMake target -> layer
    glob_dirs: dict[str, str] = {}  # variable set by file(GLOB var .../src/<dir>/...) -> dir
    for name, args in calls:
        if name == "sg_layer":
            layers.setdefault(args[0], set())
            target_layer["sg_" + args[0]] = args[0]
        elif name == "file" and len(args) >= 3 and args[0].startswith("GLOB"):
            match = re.search(r"/src/([^/]+)/", " ".join(args[2:]))
            if match:
                glob_dirs[args[1]] = match.group(1)
        elif name == "add_executable" and len(args) >= 2:
            var = re.fullmatch(r"\$\{(\w+)\}", args[1])
            if var and var.group(1) in glob_dirs:
                layers.setdefault(glob_dirs[var.group(1)], set())
                target_layer[args[0]] = glob_dirs[var.group(1)]
    for name, args in calls:
        if name in ("sg_layer", "sg_sm90a_sources"):
            layer, deps = args[0], args[1:]
        elif name == "target_link_libraries" and args and args[0] in target_layer:
            layer, deps = target_layer[args[0]], args[1:]
        else:
            continue
        layers[layer] |= {target_layer[d] for d in deps if d not in _KEYWORDS and d in target_layer}
    return layers


def reachable(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """{layer: itself and every layer it links, directly or transitively}."""
    def walk(layer: str, seen: set[str]) -> set[str]:
        if layer not in seen:
            seen.add(layer)
            for dep in graph[layer]:
                walk(dep, seen)
        return seen
    return {layer: walk(layer, set()) for layer in graph}


def include_violations(root: Path) -> list[str]:
    """One line per #include in root/src that leaves its layer's reach, plus src/ folders that are no layer."""
    src, tests = root / "src", root / "tests"
    graph = read_link_graph(src / "CMakeLists.txt")
    reach = reachable(graph)
    problems = [f"src/{d.name}/ is not a layer of src/CMakeLists.txt"
                for d in sorted(src.iterdir()) if d.is_dir() and d.name not in graph]
    for path in sorted(p for p in src.rglob("*") if p.suffix in SOURCE_SUFFIXES and p.is_file()):
        rel = path.relative_to(src)
        layer = rel.parts[0]
        if layer not in reach:
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1):
            match = _INCLUDE.match(line)
            if not match:
                continue
            quoted, name = match.group(1) == '"', match.group(2)
            target = None  # the layer the include reads from, None when outside src/
            beside = (path.parent / name).resolve()
            if quoted and beside.is_file() and beside.is_relative_to(src.resolve()):
                target = beside.relative_to(src.resolve()).parts[0]
            elif name.split("/")[0] in graph and (quoted or (src / name).is_file()):
                target = name.split("/")[0]  # a quoted one may be generated (train/tensorboard_event.pb.h)
            elif quoted and (tests / name).is_file():
                if (rel.as_posix(), name) not in ALLOWED_TEST_INCLUDES:
                    problems.append(f"src/{rel}:{number}: #include \"{name}\" reads tests/{name}; "
                                    "src/ never includes tests/ (see ALLOWED_TEST_INCLUDES)")
                continue
            if target is not None and target not in reach[layer]:
                links = ", ".join(sorted(graph[layer])) or "nothing"
                spelled = f'"{name}"' if quoted else f"<{name}>"
                problems.append(f"src/{rel}:{number}: #include {spelled}: layer {layer} (links {links}) "
                                f"does not link {target}")
    return problems


class LayerIncludes(unittest.TestCase):
    def test_tree_includes_only_linked_layers(self):
        problems = include_violations(ROOT)
        self.assertEqual(problems, [], "upward or sideways includes:\n" + "\n".join(problems))

    def test_link_graph_is_read(self):
        graph = read_link_graph(ROOT / "src" / "CMakeLists.txt")
        self.assertEqual(graph["core"], set())
        self.assertEqual(graph["reference"], {"core"})
        self.assertEqual(graph["cli"], {"bench", "train", "generate"})
        self.assertIn("kernels", reachable(graph)["model"])
        self.assertNotIn("cuda", reachable(graph)["reference"])

    def test_planted_includes_are_found(self):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            for layer in ("core", "cuda", "reference", "kernels", "fake"):
                (root / "src" / layer).mkdir(parents=True)
            (root / "tests").mkdir()
            (root / "tests" / "helper.h").write_text("")
            (root / "tests" / "simt_emulator.h").write_text("")
            (root / "src" / "CMakeLists.txt").write_text(
                "sg_layer(core DEPS Threads::Threads)  # sg_layer(fake DEPS sg_cuda)\n"
                "sg_layer(cuda      DEPS sg_core CUDA::cudart_static)\n"
                "sg_layer(reference DEPS sg_core)\n"
                "sg_layer(kernels\n  DEPS sg_reference)\n"
                "target_link_libraries(sg_kernels PRIVATE sg_cuda)\n")
            (root / "src" / "core" / "a.h").write_text('#pragma once\n#include <cstdint>\n')
            (root / "src" / "cuda" / "b.h").write_text('#include "core/a.h"\n#include "b2.h"\n')
            (root / "src" / "cuda" / "b2.h").write_text("")
            (root / "src" / "reference" / "c.cpp").write_text(
                '#include "core/a.h"\n#include "cuda/b.h"\n#  include <kernels/d.cuh>\n#include <cuda/std/limits>\n')
            (root / "src" / "reference" / "e.h").write_text('#include "../cuda/b2.h"\n#include "helper.h"\n')
            (root / "src" / "kernels" / "d.cuh").write_text(
                '#include "cuda/b.h"\n#include "reference/e.h"\n#include "simt_emulator.h"\n')
            (root / "src" / "kernels" / "warp_mma.cuh").write_text('#include "simt_emulator.h"\n')
            problems = include_violations(root)
        self.assertEqual(len(problems), 6, "\n".join(problems))
        self.assertIn("src/fake/ is not a layer of src/CMakeLists.txt", problems)  # the commented-out call is no layer
        self.assertIn('src/reference/c.cpp:2: #include "cuda/b.h": layer reference (links core) does not link cuda',
                      problems)
        self.assertIn("src/reference/c.cpp:3: #include <kernels/d.cuh>: layer reference (links core) "
                      "does not link kernels", problems)
        self.assertIn('src/reference/e.h:1: #include "../cuda/b2.h": layer reference (links core) '
                      "does not link cuda", problems)
        self.assertTrue(any(p.startswith('src/reference/e.h:2: #include "helper.h" reads tests/') for p in problems))
        self.assertTrue(any(p.startswith('src/kernels/d.cuh:3: #include "simt_emulator.h"') for p in problems))


if __name__ == "__main__":
    argv = [a for i, a in enumerate(sys.argv) if a != "--stepgraph" and (i == 0 or sys.argv[i - 1] != "--stepgraph")]
    unittest.main(argv=argv)
