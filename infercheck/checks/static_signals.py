"""Static workaround signs in a patch's added lines: a feature flag forced off, a broad exception
swallowed, a literal copy of the reported prompt, a sampling parameter neutralised. Pure text."""

from __future__ import annotations

import re

from infercheck.names import CheckFlag, CheckKind, Variant
from infercheck.payloads import Evidence, StaticDetail, StaticPayload
from infercheck.records import CheckResult, Observation

FEATURE_OFF = re.compile(
    r"\b(enable_\w+|use_\w+|\w+_enabled|sliding_window|disable_\w+|enforce_eager)\b\s*(?::\s*[\w\[\], |.]+)?=\s*"
    r"(False|None|0|-1|True)\b")
SWALLOW = re.compile(r"^\s*except\s*(\(?\s*(Exception|BaseException)\b[^:]*)?:\s*(pass|\.\.\.|return\b.*|continue)?\s*$")
NEUTRAL_SAMPLING = re.compile(
    r"\b(top_p|top_k|min_p|temperature|repetition_penalty|frequency_penalty|presence_penalty)\b\s*=\s*"
    r"(1\.0|1|0|0\.0|-1|None)\s*(#.*)?$")
STRING = re.compile(r"(['\"])((?:\\.|(?!\1).){8,})\1")


def added_lines(patch_text: str) -> list[tuple[str, int, str]]:
    """(file, new line number, text) of every added line of a unified diff."""
    out, file, line = [], "", 0
    for raw in patch_text.splitlines():
        if raw.startswith("+++ "):
            file = raw[4:].split("\t")[0].removeprefix("b/")
        elif raw.startswith("@@"):
            m = re.search(r"\+(\d+)", raw)
            line = int(m.group(1)) if m else 0
        elif raw.startswith("+"):
            out.append((file, line, raw[1:]))
            line += 1
        elif not raw.startswith("-"):
            line += 1
    return out


def is_disabling(text: str) -> bool:
    m = FEATURE_OFF.search(text)
    if not m:
        return False
    name, value = m.group(1), m.group(2)
    # enable_x = False / sliding_window = None | -1 turn a feature off; disable_x = True / enforce_eager = True too
    return (value == "True") == (name.startswith("disable_") or name == "enforce_eager")


def static_evidence(patch_text: str, reported_prompts: list[str]) -> list[Evidence]:
    lines = added_lines(patch_text)
    out = []
    for i, (file, number, text) in enumerate(lines):
        code = text.split("#", 1)[0] if not text.lstrip().startswith("#") else ""
        if not code.strip():
            continue
        if is_disabling(code) and "==" not in code:
            out.append(Evidence(file, number, "feature_off", text.strip()))
        swallowed = SWALLOW.match(code)
        if swallowed:
            following = lines[i + 1][2].strip() if i + 1 < len(lines) else ""
            if swallowed.group(3) or following in ("pass", "...", "continue") or following.startswith("return"):
                out.append(Evidence(file, number, "swallowed_exception", text.strip()))
        if NEUTRAL_SAMPLING.search(code) and "==" not in code and "def " not in code:
            out.append(Evidence(file, number, "sampling_param_ignored", text.strip()))
        for m in STRING.finditer(code):
            literal = m.group(2).encode().decode("unicode_escape", errors="ignore")
            if any(literal in p for p in reported_prompts):
                out.append(Evidence(file, number, "reported_prompt", text.strip()))
                break
    return out


def static_check(patch_text: str, reported_prompts: list[str]) -> CheckResult:
    evidence = static_evidence(patch_text, reported_prompts)
    patched = Observation(Variant.PATCHED, float(len(evidence)), not evidence, None, None,
                          StaticDetail(evidence[:10]))
    base = Observation(Variant.BASE, 0.0, True, None, None, StaticDetail(note="the unpatched tree has no added lines"))
    flags = [CheckFlag.WORKAROUND] if evidence else []
    workaround = "static signs in the patch: " + "; ".join(
        f"{e.sign} at {e.file}:{e.line} `{e.text[:80]}`" for e in evidence[:3]) if evidence else None
    return CheckResult("static/patch-signs", CheckKind.STATIC, "signs", "no added line forces a feature off, swallows "
                       "an exception, neutralises a sampling parameter, or copies the reported prompt", False, base,
                       patched, None, flags, StaticPayload(workaround), [], "always run on the patch text")
