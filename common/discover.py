"""Find chapters and their pairs by file name; nothing is registered by hand.

A pair is `baseline_<pair>.py` plus its variants, `optimized_<pair>.py` and `optimized_<pair>_<suffix>.py`.
Any other `optimized_*.py` (a typo, or `optimized_<pair>2.py`) belongs to no pair: reported, never run."""
from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Callable

from common.pair import REPO_ROOT, Pair, Variant, check_contract, load_module

CHAPTER_DIR = re.compile(r"^ch(\d+)$")
VARIANT_RULE = "variants are named optimized_<pair>.py or optimized_<pair>_<suffix>.py"


class UnknownSelection(Exception):
    """An unknown chapter or pair; the message names the valid choices."""


def chapter_dirs(root: Path = REPO_ROOT) -> dict[int, Path]:
    matches = ((CHAPTER_DIR.match(d.name), d) for d in sorted(Path(root).iterdir()))
    return dict(sorted((int(m.group(1)), d) for m, d in matches if m and d.is_dir()))


def _baselines(chapter_dir: Path) -> dict[str, Path]:
    return {p.stem[len("baseline_"):]: p for p in chapter_dir.glob("baseline_*.py")}


def _owner(stem: str, names: list[str]) -> str | None:
    """The pair an optimized file's stem belongs to; `names` longest first, so optimized_gemm_batched_x.py
    belongs to gemm_batched when both gemm and gemm_batched exist."""
    rest = stem[len("optimized_"):]
    return next((n for n in names if rest == n or rest.startswith(n + "_")), None)


def pair_files(chapter_dir: Path) -> dict[str, tuple[Path, list[Path]]]:
    """{pair name: (baseline path, [optimized paths])}, without importing anything."""
    pairs: dict[str, tuple[Path, list[Path]]] = {n: (p, []) for n, p in sorted(_baselines(chapter_dir).items())}
    names = sorted(pairs, key=len, reverse=True)
    for opt in sorted(chapter_dir.glob("optimized_*.py")):
        if name := _owner(opt.stem, names):
            pairs[name][1].append(opt)
    return pairs


def unmatched_files(chapter_dir: Path) -> list[str]:
    """One message per optimized_*.py that belongs to no pair, naming the rule (and the likely fix)."""
    names = sorted(_baselines(chapter_dir), key=len, reverse=True)
    messages = []
    for opt in sorted(chapter_dir.glob("optimized_*.py")):
        if _owner(opt.stem, names):
            continue
        rest = opt.stem[len("optimized_"):]
        near = next((n for n in names if rest.startswith(n)), None)
        hint = (f"; rename it optimized_{near}_{rest[len(near):]}.py to make it a variant of {near}" if near
                else f"; no baseline_{rest}.py beside it")
        messages.append(f"{chapter_dir.name}/{opt.name} matches no pair and is not run: {VARIANT_RULE}{hint}")
    return messages


def load_pair(chapter: int, name: str, baseline: Path, optimized: list[Path]) -> Pair:
    pair = Pair(chapter, name, Variant("baseline", baseline, load_module(baseline)),
                [Variant(p.stem, p, load_module(p)) for p in optimized])
    check_contract(pair)
    return pair


def select(chapters: list[int] | None = None, pairs: list[str] | None = None, root: Path = REPO_ROOT,
           warn: Callable[[str], None] = lambda m: print(f"warning: {m}", file=sys.stderr),
           ) -> list[tuple[int, str, Path, list[Path]]]:
    """Resolve --chapter/--pair into (chapter, name, baseline, optimized) tuples.

    A pair may be named `name` or `chN/name`. Raises UnknownSelection naming the valid choices, also for a
    chapter that has no pairs yet (running nothing is not a successful run). `warn` gets one message per
    optimized file that belongs to no pair in the chapters looked at."""
    dirs = chapter_dirs(root)
    if chapters:
        unknown = [c for c in chapters if c not in dirs]
        if unknown:
            raise UnknownSelection(f"unknown chapter {unknown[0]}; valid chapters: {', '.join(map(str, dirs))}")
        with_pairs = [c for c, d in dirs.items() if pair_files(d)]
        empty = [c for c in chapters if c not in with_pairs]
        if empty:
            raise UnknownSelection(f"chapter {empty[0]} has no pairs yet; chapters with pairs: "
                                   f"{', '.join(map(str, with_pairs)) or 'none'}")
        dirs = {c: dirs[c] for c in dict.fromkeys(chapters)}
    for d in dirs.values():
        for message in unmatched_files(d):
            warn(message)
    every = [(c, n, b, o) for c, d in dirs.items() for n, (b, o) in pair_files(d).items()]
    if not every:
        raise UnknownSelection(f"no pairs under {root} (a pair is chN/baseline_<name>.py with its optimized_<name>.py)")
    if not pairs:
        return every
    chosen = []
    for want in pairs:
        hits = [t for t in every if want in (t[1], f"ch{t[0]}/{t[1]}")]
        if not hits:
            valid = ", ".join(f"ch{c}/{n}" for c, n, _, _ in every)
            raise UnknownSelection(f"unknown pair {want!r}; valid pairs: {valid}")
        chosen.extend(h for h in hits if h not in chosen)
    return chosen
