#!/usr/bin/env python3
"""Check a run that must fail, by its report: exactly the named entries failed, and every other entry of every
pair that ran verified. For the session scripts' fixture runs, whose exit status 1 alone cannot tell the faults
being caught from a correct pair failing or a crash.

    python scripts/expect_failures.py REPORT_DIR ENTRY...    ENTRY: chNN/pair/variant, e.g.
                                                             ch92/sidestream/optimized_sidestream_escaped

Exit 0 when the failures are exactly those; else one line per difference and exit 1; 2 when REPORT_DIR holds no
readable results.json. A SUSPECT entry counts as failed here (its time is not trusted).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common.results import entries, pair_key, pair_level_error, read_results, variant_status  # noqa: E402


def failed_entries(doc: dict) -> set[str]:
    """chNN/pair/variant for each entry that failed or is SUSPECT; chNN/pair for a pair that failed as a whole."""
    failed = set()
    for pair in doc["pairs"]:
        if pair["status"] == "skipped":
            continue
        if pair_level_error(pair):
            failed.add(pair_key(pair))
        failed |= {f"{pair_key(pair)}/{v['name']}" for v in entries(pair)
                   if variant_status(v)[0] in ("FAILED", "SUSPECT")}
    return failed


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    doc = read_results(Path(argv[0]) / "results.json")
    if isinstance(doc, str):
        print(f"error: {doc}", file=sys.stderr)
        return 2
    failed, expected = failed_entries(doc), set(argv[1:])
    wrong = [f"failed, though it should have passed: {e}" for e in sorted(failed - expected)] + \
            [f"did not fail, though it holds a fault: {e}" for e in sorted(expected - failed)]
    for line in wrong:
        print(line, file=sys.stderr)
    if not wrong:
        print(f"as expected: {len(expected)} failed ({', '.join(sorted(expected))}), every other entry verified")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
