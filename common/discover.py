"""Find chapters and their pairs by file name; nothing is registered by hand."""
from __future__ import annotations

import re
from pathlib import Path

from common.pair import REPO_ROOT, Pair, Variant, check_contract, load_module

CHAPTER_DIR = re.compile(r"^ch(\d+)$")


class UnknownSelection(Exception):
    """An unknown chapter or pair; the message names the valid choices."""


def chapter_dirs(root: Path = REPO_ROOT) -> dict[int, Path]:
    found = {}
    for d in sorted(Path(root).iterdir()):
        m = CHAPTER_DIR.match(d.name)
        if d.is_dir() and m:
            found[int(m.group(1))] = d
    return dict(sorted(found.items()))


def pair_files(chapter_dir: Path) -> dict[str, tuple[Path, list[Path]]]:
    """{pair name: (baseline path, [optimized paths])}, without importing anything."""
    baselines = {p.stem[len("baseline_"):]: p for p in chapter_dir.glob("baseline_*.py")}
    pairs: dict[str, tuple[Path, list[Path]]] = {n: (p, []) for n, p in baselines.items()}
    # Longest name first, so optimized_batched_gemm_x.py belongs to batched_gemm_x if both pairs exist.
    names = sorted(baselines, key=len, reverse=True)
    for opt in sorted(chapter_dir.glob("optimized_*.py")):
        rest = opt.stem[len("optimized_"):]
        for name in names:
            if rest == name or rest.startswith(name + "_"):
                pairs[name][1].append(opt)
                break
    return dict(sorted(pairs.items()))


def load_pair(chapter: int, name: str, baseline: Path, optimized: list[Path]) -> Pair:
    base = Variant("baseline", baseline, load_module(baseline))
    variants = [Variant(p.stem, p, load_module(p)) for p in optimized]
    pair = Pair(chapter, name, base, variants)
    check_contract(pair)
    return pair


def select(chapters: list[int] | None = None, pairs: list[str] | None = None,
           root: Path = REPO_ROOT) -> list[tuple[int, str, Path, list[Path]]]:
    """Resolve --chapter/--pair into (chapter, name, baseline, optimized) tuples.

    A pair may be named `name` or `chN/name`. Raises UnknownSelection naming the valid choices.
    """
    dirs = chapter_dirs(root)
    if chapters:
        unknown = [c for c in chapters if c not in dirs]
        if unknown:
            raise UnknownSelection(f"unknown chapter {unknown[0]}; valid chapters: {', '.join(map(str, dirs))}")
        dirs = {c: dirs[c] for c in chapters}
    every = [(c, n, b, o) for c, d in dirs.items() for n, (b, o) in pair_files(d).items()]
    if not pairs:
        return every
    chosen = []
    for want in pairs:
        hits = [t for t in every if want in (t[1], f"ch{t[0]}/{t[1]}")]
        if not hits:
            valid = ", ".join(f"ch{c}/{n}" for c, n, _, _ in every) or "none"
            raise UnknownSelection(f"unknown pair {want!r}; valid pairs: {valid}")
        chosen.extend(h for h in hits if h not in chosen)
    return chosen
