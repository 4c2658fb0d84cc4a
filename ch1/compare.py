"""Run chapter 1's pairs through the shared harness (a thin wrapper around benchmark.py).

    python3 ch1/compare.py [benchmark.py flags, e.g. --quick or --pair cuda_graphs]
    python3 -c "from ch1.compare import profile; profile()"

`profile()` adds a profiler trace of every variant next to the report: nsys
when it is installed, else torch.profiler (Chrome/Perfetto JSON).
"""
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmark import main  # noqa: E402


def compare(argv=None) -> int:
    return main(["--chapter", "1", *(sys.argv[1:] if argv is None else argv)])


def profile(tool: str | None = None, argv=None) -> int:
    tool = tool or ("nsys" if shutil.which("nsys") else "torch")
    print(f"profiling chapter 1 with {tool}" + ("" if tool != "torch" else " (nsys not installed)"), file=sys.stderr)
    return main(["--chapter", "1", "--profile", tool, *(argv or [])])


if __name__ == "__main__":
    sys.exit(compare())
