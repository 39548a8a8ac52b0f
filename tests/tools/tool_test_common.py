"""What the tests/tools/*_test.py scripts share: their command line and the check for `tokenizers`.

    python3 tests/tools/NAME_test.py --stepgraph build/src/stepgraph [unittest options, e.g. -v]
"""
from __future__ import annotations

import argparse
import os
import sys
import unittest


def main(doc: str, test_globals: dict) -> int:
    """Parses --stepgraph into test_globals["STEPGRAPH"], runs the __main__ module's tests; 0 when all pass."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stepgraph", required=True, help="path of the stepgraph binary")
    args, rest = parser.parse_known_args()
    test_globals["STEPGRAPH"] = os.path.abspath(args.stepgraph)
    try:
        import tokenizers  # noqa: F401
    except ImportError:
        print("FAILED: the Python package `tokenizers` is missing; run `bash scripts/setup.sh`", file=sys.stderr)
        return 1
    result = unittest.main(argv=[sys.argv[0], *rest], exit=False, verbosity=2).result
    return 0 if result.wasSuccessful() else 1
