#!/usr/bin/env python3
"""What README.md and docs/*.md cite, checked against the tree (ctest tools/docs_references_test, label cpu): the
rules, and how a session log keeps a name of its time, are in tests/tools/docs_references.py.

    python3 tests/tools/docs_references_test.py --stepgraph build/src/stepgraph [-v]
"""
from __future__ import annotations

import os
import sys
import tempfile
import unittest
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in tests/tools/
from docs_references import check_docs  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SELF = "tests/tools/docs_references.py"  # where 'History' says how a line keeps an old name
STEPGRAPH = ""  # the binary under test: --stepgraph (ctest passes the built one)


class DocsReferences(unittest.TestCase):
    def test_every_reference_of_the_docs_exists(self):
        problems, counts = check_docs(ROOT, STEPGRAPH)
        if problems:
            self.fail(f"{len(problems)} stale references in the docs (a line that keeps one on purpose: see "
                      f"'History' in {SELF}):\n" + "\n".join(map(str, problems)))
        # The extraction itself is tested: each kind of reference is found as often as the docs cite it (roughly).
        for kind, at_least in {"path": 700, "gtest": 200, "gtest filter": 100, "config key": 400, "command": 100,
                               "flag": 200, "python flag": 100, "gpu.sh part": 100, "recipe": 40,
                               "variable": 100}.items():
            self.assertGreaterEqual(counts.get(kind, 0), at_least, f"only {counts.get(kind, 0)} {kind} references "
                                    f"found: has the extraction broken? {counts}")

    def test_planted_stale_references_are_each_named(self):
        """A doc citing one wrong thing of each kind (and the right ones beside them) against this tree."""
        doc = "\n".join([
            "# Planted",                                                                            # 1
            "`src/train/host_memory.cpp`, `train/host_memory.h`, `train/no_such_file.cpp`.",         # 2
            "`HostMemoryPlan.TheRanksOnANodeShareItsMemory`, `HostMemory.TheRanksOnANodeShareItsMemory`, "
            "`HostMemoryPlan.NoSuchTest`.",                                                           # 3
            "`checkpoint.most_recent_k`, `model.cuda_graph_scope: [attn]`, `checkpoint.most_recent`.",  # 4
            "",                                                                                       # 5
            "    stepgraph bench -m llama -mr tiny --compare none,local --modes local",               # 6
            "    bash scripts/gpu.sh tests dp nonsense",                                              # 7
            "Run `stepgraph_gpu_tests --gtest_filter='GraphModesGpu.*:FirstWriterGpu*'`.",            # 8
            "Old: `GemmGpu.Gone` <!-- docs-references historical: GemmGpu.Gone -->",                 # 9
            "Fine: `llama/tiny` <!-- docs-references historical: llama/tiny -->",                    # 10
            "`STEPGRAPH_NO_SUCH_VARIABLE` and `moe/no_such_recipe`.",                                 # 11
            "`python3 tools/train_tokenizer.py --vocab-size 8 --vocab_size 8`",                       # 12
            "`stepgraph launch -n 2 -- train llama/tiny --cpu --gpu`",                                # 13
        ]) + "\n"
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "planted.md"
            path.write_text(doc)
            problems, _ = check_docs(ROOT, STEPGRAPH, [path])
        got = sorted((p.line, p.ref) for p in problems)
        self.assertEqual(got, [(2, "train/no_such_file.cpp"), (3, "HostMemory.TheRanksOnANodeShareItsMemory"),
                               (3, "HostMemoryPlan.NoSuchTest"), (4, "checkpoint.most_recent"), (6, "--modes"),
                               (7, "gpu.sh nonsense"), (8, "FirstWriterGpu*"), (10, "llama/tiny"),
                               (11, "STEPGRAPH_NO_SUCH_VARIABLE"), (11, "moe/no_such_recipe"), (12, "--vocab_size"),
                               (13, "--gpu")],
                         "\n".join(map(str, problems)))


if __name__ == "__main__":
    args = sys.argv[1:]
    if "--stepgraph" in args:
        i = args.index("--stepgraph")
        STEPGRAPH = os.path.abspath(args[i + 1])
        del args[i:i + 2]
    if not STEPGRAPH or not os.access(STEPGRAPH, os.X_OK):
        sys.exit(f"usage: {sys.argv[0]} --stepgraph PATH_OF_THE_BUILT_STEPGRAPH [unittest options]")
    unittest.main(argv=[sys.argv[0], *args])
