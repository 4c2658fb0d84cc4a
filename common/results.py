"""What a results.json says: its schema, a pair's entries and failures, a variant's one status, a speedup's
interval and the digits it supports, the run's labels. Read by the report, the figures and recommendations."""
from __future__ import annotations

import json
import math
from pathlib import Path

SCHEMA_VERSION = 1
REQUIRED_TOP = {"schema_version", "device", "torch", "cuda", "driver", "git_commit", "created", "pairs"}
REQUIRED_PAIR = {"chapter", "name", "bound", "status", "baseline", "variants"}
REQUIRED_VARIANT = {"name", "median_ms", "speedup", "verified", "pct_of_ceiling"}
BY_DESIGN = ("pitfall", "tradeoff")   # variant kinds that are slower on purpose: never a failure, never a win


def variant_status(v: dict) -> tuple[str, str]:
    """(status, reason), the one status a variant has in summary.md, the figures and recommendations.md: skipped,
    FAILED, SUSPECT (faster than its workload allows: no speedup is shown), pitfall, tradeoff or ok."""
    if v.get("skipped"):
        return "skipped", str(v["skipped"])
    if v.get("error"):
        return "FAILED", str(v["error"])
    if v.get("verified") is not True:
        message = (v.get("verification") or {}).get("message")
        return "FAILED", f"failed verification: {message}" if message else "not verified"
    if v.get("suspect"):
        return "SUSPECT", str(v["suspect"])
    if v.get("kind") in BY_DESIGN:
        return v["kind"], "slower by design"
    return "ok", ""


def validate_results(doc: dict) -> list[str]:
    """Every way `doc` departs from the results.json schema (empty when it conforms)."""
    errs = [f"missing top-level key {k!r}" for k in sorted(REQUIRED_TOP - doc.keys())]
    if not isinstance(doc.get("device"), dict) or "name" not in doc.get("device", {}):
        errs.append("device must be an object with a name")
    for i, p in enumerate(doc.get("pairs", [])):
        errs += [f"pairs[{i}] missing {k!r}" for k in sorted(REQUIRED_PAIR - p.keys())]
        if p.get("status") not in ("ok", "failed", "skipped"):
            errs.append(f"pairs[{i}].status {p.get('status')!r}")
        if p.get("status") == "skipped":
            continue
        for j, v in enumerate(entries(p)):
            errs += [f"pairs[{i}] variant {j} missing {k!r}" for k in sorted(REQUIRED_VARIANT - v.keys())]
            if v.get("verified") is False and v.get("speedup") is not None:
                errs.append(f"pairs[{i}] variant {v.get('name')} failed verification but has a speedup")
            if v.get("suspect") and v.get("speedup") is not None and v.get("name") != "baseline":
                errs.append(f"pairs[{i}] variant {v.get('name')} is suspect but has a speedup")
    return errs


def read_results(path: Path) -> dict | str:
    """A results.json's document, or the one line that says why the file is not one."""
    try:
        doc = json.loads(Path(path).read_text())
    except OSError as e:
        return f"cannot read {path}: {e.strerror or e}"
    except UnicodeDecodeError:
        return f"{path} is not a results.json: not UTF-8 text"
    except json.JSONDecodeError as e:
        return f"{path} is not a results.json: not JSON ({e.msg} at line {e.lineno})"
    if not isinstance(doc, dict):
        kind = {list: "list", str: "string", int: "number", float: "number", bool: "boolean"}.get(type(doc), "null")
        return f"{path} is not a results.json: its top level is a {kind}, not an object"
    try:
        problems = validate_results(doc)
    except (TypeError, AttributeError, KeyError) as e:  # keys present but of the wrong kind
        problems = [f"malformed ({type(e).__name__}: {e})"]
    return f"{path} is not a results.json: {problems[0]}" if problems else doc


def entries(pair: dict) -> list[dict]:
    return ([pair["baseline"]] if pair.get("baseline") else []) + list(pair.get("variants") or [])


def pair_key(pair: dict) -> str:
    return f"ch{pair['chapter']}/{pair['name']}"


def pair_level_error(pair: dict) -> str | None:
    """The pair's own failure (timeout, crash before any result, skip) when no entry of it carries that failure."""
    if pair.get("status") != "failed" or \
            (pair.get("baseline") and any(variant_status(v)[0] == "FAILED" for v in entries(pair))):
        return None
    error, hung = pair.get("error") or "failed", pair.get("hung_variant")
    return error + (f" (hung in {hung})" if hung and hung not in error else "")


def pair_failures(pair: dict) -> list[str]:
    """Every failure reason of a pair, first to last, each once."""
    failed = [(v["name"], variant_status(v)[1]) for v in entries(pair) if variant_status(v)[0] == "FAILED"]
    # an older results.json has no "errors": each failed entry's own reason
    reasons = list(pair["errors"]) if pair.get("errors") else [f"{name}: {why}" for name, why in failed]
    first = pair.get("error")
    # the pair's first reason is usually one of its entries' reasons, worded "<variant> failed (<stage>): <why>"
    restated = first and any(first.startswith(name + " ") and why in first for name, why in failed)
    if first and pair.get("status") == "failed" and not restated and not any(first in r for r in reasons):
        reasons.insert(0, first)
    if (hung := pair.get("hung_variant")) and not any(hung in r for r in reasons):
        timeout = next((i for i, r in enumerate(reasons) if r.startswith("timed out")), None)
        if timeout is None:
            reasons.append(f"hung in {hung}")
        else:
            reasons[timeout] += f" (hung in {hung})"
    return list(dict.fromkeys(reasons))


def speedup_interval(base: dict | None, v: dict) -> tuple[float, float] | None:
    """The speedup's 95% interval, both ends positive: the harness's `speedup_ci` where it is one, else from both
    medians' intervals, as the harness computes it. A median m with interval ± h·m (h = median_ci_pct / 200) is read
    as m/(1+h) .. m·(1+h): times and their ratios are multiplicative, and m - h·m is no time once h reaches 1 (a noisy
    CPU baseline once gave "0.1× (-0.3–1.1)"). So the ratio lies within s/((1+hb)(1+hv)) .. s·(1+hb)(1+hv)."""
    s = v.get("speedup")
    if not s or not math.isfinite(s) or s <= 0:
        return None
    stored = v.get("speedup_ci")
    if stored and all(isinstance(x, (int, float)) and math.isfinite(x) for x in stored) and \
            0 < stored[0] <= s * (1 + 1e-9) and stored[1] >= s * (1 - 1e-9):
        return float(stored[0]), float(stored[1])
    # a stored interval with a non-positive end (written before the multiplicative form): rebuilt from the medians
    hb, hv = ((base or {}).get("median_ci_pct") or 0) / 200, (v.get("median_ci_pct") or 0) / 200
    factor = (1 + hb) * (1 + hv)
    if factor == 1 or not math.isfinite(factor) or hb < 0 or hv < 0:
        return None
    return s / factor, s * factor


def interval_rel_halfwidth(value: float, interval: tuple[float, float] | None) -> float | None:
    if not interval or not value:
        return None
    return max(value - interval[0], interval[1] - value) / abs(value)


def _ci_decimals(value: float, rel_halfwidth: float | None) -> int:
    """Decimal places that `value ± value*rel_halfwidth` supports: the interval's first significant digit
    (two when that digit is a 1, so 7.87 ± 0.15 keeps its 7), never more than 4 significant digits."""
    magnitude = math.floor(math.log10(abs(value))) if value else 0
    most = 3 - magnitude
    if not value or not rel_halfwidth or rel_halfwidth <= 0 or not math.isfinite(rel_halfwidth):
        return 2 - magnitude if rel_halfwidth is None else most   # unknown interval: 3 digits
    halfwidth = abs(value) * rel_halfwidth
    exponent = math.floor(math.log10(halfwidth))
    leading = round(halfwidth / 10 ** exponent)
    return min(most, -exponent + (1 if leading < 2 else 0))


def _rounded(value: float, decimals: int) -> str:
    """`value` at `decimals` places, or more where fewer would round its first significant digit away (4.79 at
    -1 places is "5", not "0")."""
    if value:
        decimals = max(decimals, -math.floor(math.log10(abs(value))))
    return f"{value:.{decimals}f}" if decimals >= 0 else f"{round(value, decimals):.0f}"


def format_with_ci(value: float | None, rel_halfwidth: float | None) -> str:
    """`value` with the digits its 95% interval (± rel_halfwidth × value) supports: (7.9, 0.04) -> "7.9",
    (40.12, 0.0001) -> "40.12", (123, 0.2) -> "120", (4.79, 7) -> "5". An unknown interval (None): 3 digits."""
    if value is None or not math.isfinite(value):
        return "–"
    return _rounded(value, _ci_decimals(value, rel_halfwidth))


def speedup_text(v: dict, base: dict | None) -> str:
    """"7.9× (7.6–8.2)": the speedup and its interval at the digits the interval supports; "–" if there is none.
    An end is never printed as 0 (0.1× (0.05–1.1), not 0.1× (0.0–1.1)): it keeps its own first digit."""
    s = v.get("speedup")
    if s is None or variant_status(v)[0] in ("FAILED", "SUSPECT", "skipped"):
        return "–"
    interval = speedup_interval(base, v)
    decimals = _ci_decimals(s, interval_rel_halfwidth(s, interval))
    ends = [_rounded(x, decimals) if x > 0 else "–" for x in interval or ()]
    return f"{_rounded(s, decimals)}×" + (f" ({ends[0]}–{ends[1]})" if ends else "")


def host_text(doc: dict) -> str | None:
    host = doc.get("host") or {}
    if not host.get("cpu"):
        return None
    cores, usable = host.get("cores"), host.get("cores_usable")
    count = "" if not cores else f", {cores} cores" + (f" ({usable} usable)" if usable and usable != cores else "")
    return f"{host['cpu']}{count}"


def run_label(doc: dict) -> str:
    """What the run measured: the GPU's name, or for a CPU run the CPU's model."""
    host = doc.get("host") or {}
    if doc["device"].get("type") == "cpu" and host.get("cpu"):
        return f"{host['cpu']} (CPU)"
    return doc["device"].get("name", "?")


def by_design_text(v: dict, base: dict | None = None) -> str:
    """What a declared pitfall or trade-off's figure says: "slower by design", or, when its whole interval
    is above 1.0, that the declaration does not hold here (a pitfall that wins is a mislabel to fix)."""
    interval = speedup_interval(base, v)
    return "declared slower, measured faster" if interval and interval[0] > 1 else "slower by design"
