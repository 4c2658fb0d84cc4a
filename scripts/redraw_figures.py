#!/usr/bin/env python3
"""Redraw speedup.png and roofline.png next to each given results.json, from the JSON alone (no re-measuring).

    python scripts/redraw_figures.py profiles/h100/ch1/results.json profiles/h100/ch11/results.json

summary.md is left as it was written at measurement time; --summary rewrites it too, in the current format.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from common.figures import write_figures  # noqa: E402
from common.files import atomic_write  # noqa: E402
from common.report import summary_markdown  # noqa: E402
from common.results import read_results  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="+", type=Path, help="results.json files")
    ap.add_argument("--summary", action="store_true", help="also rewrite summary.md")
    a = ap.parse_args(argv)
    for path in a.results:
        doc = read_results(path)
        if isinstance(doc, str):
            print(f"error: {doc}", file=sys.stderr)
            return 2
        written = write_figures(doc, path.parent)
        if a.summary:
            atomic_write(path.parent / "summary.md", [summary_markdown(doc)])
            written.append(path.parent / "summary.md")
        print("wrote " + ", ".join(str(p) for p in written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
