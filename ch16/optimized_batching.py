"""Continuous batching with chunked prefill: each iteration decodes one token for every running
request and spends the rest of a token budget prefilling waiting requests in chunks; a finished
request's slot is refilled at once, so slots stay busy instead of waiting for the batch's longest output."""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
from ch16.baseline_batching import server


def prepare(w):
    return server(w, "continuous")


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
