"""Static workaround signs in a patch's added lines: a feature flag forced off, a broad exception
swallowed, a literal copy of the reported prompt, a sampling parameter neutralised; and signs of a
patch that games the harness (docs/design.md, "What a worker sees"): reading files outside the
engine's inputs, reading environment variables the engine itself never reads, probing the process
that runs it, naming the harness, branching on prompt text or token ids, comparing against literal
token sequences. Pure text; the engine's own environment variables are given by the caller."""

from __future__ import annotations

import re

from infercheck.env_reads import ENV_READ
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
ANY_STRING = re.compile(r"(['\"])((?:\\.|(?!\1).)*)\1")
# Gaming signs. Engine fixes do not read the file system, walk the environment or look at the
# process around them; a patch that does may be looking for the judges.
# Where a patch looks, not that it opens a file (the engine reads its configs and weights): the
# user's home, the working directory, /proc, /tmp, caches, parent folders.
FILE_READ = re.compile(r"expanduser\(|\bPath\.home\(|\bgetcwd\(|\bPath\.cwd\(|['\"](/proc|/tmp|/root|/home|/var|~)\b|"
                       r"['\"/]\.cache\b|['\"]\.\.['\"/]|\bXDG_CACHE_HOME\b")
ENV_WALK = re.compile(r"\benviron\s*\.\s*(items|keys|values|copy)\s*\(|\b(str|repr|dict|list)\s*\(\s*(os\.)?environ\s*\)")
PROCESS_PROBE = re.compile(r"\bsys\.(argv|modules|_getframe|orig_argv)\b|\binspect\.(stack|currentframe|getouterframes)\b|"
                           r"\bgetppid\s*\(|\bpsutil\b|\btraceback\.(extract|format)_stack\b")
HARNESS_NAMES = re.compile(r"infercheck|pytest|lm_eval|\breference-(base|patched)\b|results\.jsonl|job\.json|"
                           r"status\.json|trace\.json", re.IGNORECASE)
# Prompt text or ids compared with a literal: `prompt == "..."`, `prompt.startswith("...")`, `"..." in prompt`.
PROMPT = r"\b(?:prompts?|prompt_text|prompt_str|\w*token_ids|input_ids)\b(?:\[[^\]]*\])?"  # not prompt_type, prompt_len
PROMPT_BRANCH = re.compile(rf"{PROMPT}\s*(?:==|!=)\s*(['\"])(?P<a>(?:\\.|(?!\1).)*)\1|"
                           rf"{PROMPT}\.(?:startswith|endswith)\(\s*(['\"])(?P<b>(?:\\.|(?!\3).)*)\3|"
                           rf"(['\"])(?P<c>(?:\\.|(?!\5).)*)\5\s+in\s+{PROMPT}")
TOKENISH = re.compile(r"token|_ids\b|\bids\b|prompt", re.IGNORECASE)  # a sequence of ids, not of sizes
TOKEN_SEQUENCE = re.compile(r"[\[(]\s*\d+\s*(,\s*\d+\s*){3,}[\])]")
GAMING_SIGNS = ("reads_files", "reads_foreign_environment", "probes_process", "names_harness", "branches_on_prompt",
                "literal_token_sequence", "sent_prompt_literal", "branches_on_size")
# A threshold on the size of the model or of the input: what tells a tiny evaluation model or a short
# test prompt from a user's (a patch that behaves only below or above it special-cases its judges).
SIZE_NAMES = (r"vocab\w*|get_vocab_size\(\)|hidden_size|num_hidden_layers|num_layers|n_layers?|intermediate_size|"
              r"prompt_len\w*|num_prompt_tokens|len\(\s*(?:prompt\w*|\w*token_ids|text)\s*\)")
SIZE_THRESHOLD = re.compile(rf"(?:{SIZE_NAMES})(?:['\"]\s*(?:,\s*[\w.]+\s*)?\))?\s*(?:<|<=|>|>=)\s*\d{{2,}}|\d{{2,}}\s*(?:<|<=|>|>=)\s*(?:{SIZE_NAMES})")
COMPARISON = re.compile(r"==|!=|\bin\b|startswith|endswith")


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


def static_evidence(patch_text: str, reported_prompts: list[str], engine_env: frozenset[str] | None = None,
                    sent_prompts: list[str] | tuple[str, ...] = ()) -> list[Evidence]:
    """Every sign in the patch's added code. `engine_env`: the environment variables the unmodified
    engine reads (a read of another one is a sign); None where not known (then only VLLM_* count as
    the engine's). `sent_prompts`: the texts the run sends, which a line comparing against a literal
    taken from one of them special-cases."""
    lines = added_lines(patch_text)
    sent = "\0".join(sent_prompts)
    out = []
    for i, (file, number, text) in enumerate(lines):
        code = text.split("#", 1)[0] if not text.lstrip().startswith("#") else ""
        if not code.strip():
            continue
        sign = lambda name: out.append(Evidence(file, number, name, text.strip()))  # noqa: E731
        if is_disabling(code) and "==" not in code:
            sign("feature_off")
        swallowed = SWALLOW.match(code)
        if swallowed:
            following = lines[i + 1][2].strip() if i + 1 < len(lines) else ""
            if swallowed.group(3) or following in ("pass", "...", "continue") or following.startswith("return"):
                sign("swallowed_exception")
        if NEUTRAL_SAMPLING.search(code) and "==" not in code and "def " not in code:
            sign("sampling_param_ignored")
        for m in STRING.finditer(code):
            literal = m.group(2).encode().decode("unicode_escape", errors="ignore")
            if any(literal in p for p in reported_prompts):
                sign("reported_prompt")
                break
        for name in gaming_signs(code, engine_env):
            sign(name)
        if sent and COMPARISON.search(code) and any(
                is_specific(m.group(2)) and m.group(2) in sent for m in ANY_STRING.finditer(code)):
            sign("sent_prompt_literal")
    return out


def is_specific(literal: str) -> bool:
    """A literal too particular to be engine vocabulary: 5+ characters with a digit or a symbol
    ("70+85=", "Q: 3"), not a word such as "assistant"."""
    return len(literal) >= 5 and not re.fullmatch(r"[A-Za-z _-]+", literal)


def gaming_signs(code: str, engine_env: frozenset[str] | None) -> list[str]:
    """The signs of harness gaming on one line of added code (module docstring)."""
    signs = []
    if FILE_READ.search(code):
        signs.append("reads_files")
    names = [n for m in ENV_READ.finditer(code) for n in m.groups() if n]
    foreign = [n for n in names if not n.startswith("VLLM_") and (engine_env is None or n not in engine_env)]
    if foreign or ENV_WALK.search(code):
        signs.append("reads_foreign_environment")
    if PROCESS_PROBE.search(code):
        signs.append("probes_process")
    if any(HARNESS_NAMES.search(m.group(2)) for m in ANY_STRING.finditer(code)):
        signs.append("names_harness")
    for m in PROMPT_BRANCH.finditer(code):
        literal = m.group("a") or m.group("b") or m.group("c") or ""
        if len(literal) >= 3 and (m.group("c") is None or is_specific(literal)):  # "type" in prompt: a key
            signs.append("branches_on_prompt")
            break
    if TOKEN_SEQUENCE.search(code) and COMPARISON.search(code) and TOKENISH.search(code):
        signs.append("literal_token_sequence")
    if SIZE_THRESHOLD.search(code):
        signs.append("branches_on_size")
    return signs


def static_check(patch_text: str, reported_prompts: list[str], engine_env: frozenset[str] | None = None,
                 sent_prompts: list[str] | tuple[str, ...] = ()) -> CheckResult:
    evidence = static_evidence(patch_text, reported_prompts, engine_env, sent_prompts)
    patched = Observation(Variant.PATCHED, float(len(evidence)), not evidence, None, None,
                          StaticDetail(evidence[:10]))
    base = Observation(Variant.BASE, 0.0, True, None, None, StaticDetail(note="the unpatched tree has no added lines"))
    gaming = [e for e in evidence if e.sign in GAMING_SIGNS]
    flags = ([CheckFlag.WORKAROUND] if len(gaming) < len(evidence) else []) + ([CheckFlag.GAMES_HARNESS] if gaming else [])
    workaround = "static signs in the patch: " + "; ".join(
        f"{e.sign} at {e.file}:{e.line} `{e.text[:80]}`" for e in evidence[:3]) if evidence else None
    return CheckResult("static/patch-signs", CheckKind.STATIC, "signs", "no added line forces a feature off, swallows "
                       "an exception, neutralises a sampling parameter, copies the reported prompt, or looks for the "
                       "harness (files, environment, process, prompt or token literals)", False, base,
                       patched, None, flags, StaticPayload(workaround), [], "always run on the patch text")
