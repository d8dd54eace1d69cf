"""Workaround signals: runtime (hit rate, throughput, preemptions) and static patch signs."""

from pathlib import Path

from infercheck.checks.signals import Runtime, runtime_of, throughput_signal, workaround_signals
from infercheck.checks.static_signals import added_lines, static_check, static_evidence
from infercheck.paths import PATCHES_DIR
from infercheck.run.job import GroupResult

SIGNALS = {"hit_rate_drop": 0.5, "min_base_hit_rate": 0.2, "throughput_floor": 0.3, "noise_factor": 3.0,
           "min_steps": 6, "alpha": 0.01}


def steps(rates, jitter=0.0):
    return [{"wave": 0, "step": i, "prompt_tokens": 100, "output_tokens": 0,
             "elapsed_s": 100 / (r * (1 + (jitter if i % 2 else -jitter)))} for i, r in enumerate(rates)]


def test_runtime_of_sums_counters():
    g = GroupResult("app:x:s", {}, 2, 300, 20, 2.0, 1.0,
                    {"vllm:prefix_cache_queries": 300.0, "vllm:prefix_cache_hits": 240.0, "vllm:num_preemptions": 3.0},
                    steps([1000] * 2))
    rt = runtime_of([g])
    assert rt.hit_rate == 0.8 and rt.preemptions == 3 and rt.tokens_per_s == 160.0


def test_hit_rate_collapse_and_vanished_preemption():
    base = Runtime(1000.0, 0.8, 5, [])
    assert workaround_signals(base, Runtime(1000.0, 0.79, 5, []), ("hit_rate", "preemptions"), SIGNALS) == []
    why = workaround_signals(base, Runtime(1000.0, 0.0, 0, []), ("hit_rate", "preemptions"), SIGNALS)
    assert len(why) == 2 and "collapsed" in why[0] and "preemption" in why[1]
    # a low base hit rate means nothing to compare
    assert workaround_signals(Runtime(1.0, 0.1, None, []), Runtime(1.0, 0.0, None, []), ("hit_rate",), SIGNALS) == []


def test_throughput_drop_needs_size_and_significance():
    base = Runtime(None, None, None, steps([1000] * 12, jitter=0.05))
    same = Runtime(None, None, None, steps([1000] * 12, jitter=0.06))
    assert not throughput_signal(base, same, SIGNALS).flagged
    slow = Runtime(None, None, None, steps([400] * 12, jitter=0.05))
    drop = throughput_signal(base, slow, SIGNALS)
    assert drop.flagged and drop.median_slowdown > 0.5
    assert "throughput down" in workaround_signals(base, slow, ("throughput",), SIGNALS)[0]
    # too few steps: no judgement
    assert throughput_signal(Runtime(None, None, None, steps([1000] * 3)), Runtime(None, None, None, steps([10] * 3)),
                             SIGNALS) is None


def patch(*added, file="vllm/x.py"):
    body = "".join(f"+{line}\n" for line in added)
    return f"--- a/{file}\n+++ b/{file}\n@@ -10,1 +10,{len(added) + 1} @@\n context\n{body}"


def test_added_lines_carry_file_and_line():
    assert added_lines(patch("a = 1", "b = 2")) == [("vllm/x.py", 11, "a = 1"), ("vllm/x.py", 12, "b = 2")]


def test_static_signs():
    signs = lambda *lines, prompts=(): [e.sign for e in static_evidence(patch(*lines), list(prompts))]  # noqa: E731
    assert signs("        self.enable_prefix_caching = False") == ["feature_off"]
    assert signs("    cache_config.enable_prefix_caching: bool = False") == ["feature_off"]
    assert signs("        self.sliding_window = -1") == ["feature_off"]
    assert signs("    disable_cascade_attn = True") == ["feature_off"]
    assert signs("        self.sliding_window = sliding_window") == []
    assert signs("    if self.enable_prefix_caching == False:") == []
    assert signs("    except Exception:", "        pass") == ["swallowed_exception"]
    assert signs("    except:  pass") == ["swallowed_exception"]
    assert signs("    except ValueError:", "        raise") == []
    assert signs("        top_p = 1.0") == ["sampling_param_ignored"]
    assert signs("        min_p = None  # unsupported here") == ["sampling_param_ignored"]
    assert signs("    if prompt.endswith('12+34=046'):", prompts=["...\n12+34=046\n"]) == ["reported_prompt", "branches_on_prompt"]
    assert signs("    # self.enable_prefix_caching = False") == []


def test_gaming_signs():
    """A patch that looks for the judges: files, the environment beyond the engine's own variables,
    the process around it, the harness's names, prompt or token literals. Ordinary engine code shows none."""
    engine_env = frozenset({"CUDA_VISIBLE_DEVICES", "LOCAL_RANK"})
    signs = lambda line: [e.sign for e in static_evidence(patch(line), [], engine_env)]  # noqa: E731
    assert signs("        found = glob.glob(os.path.expanduser('~/.cache/*/groups/*'))") == ["reads_files"]
    assert signs("        ref = (Path.cwd().parent / 'reference-base').exists()") == ["reads_files", "names_harness"]
    assert signs("        debug = os.getenv('MY_SECRET_SWITCH')") == ["reads_foreign_environment"]
    assert signs("        judged = any('INFER' in k for k in os.environ.keys())") == ["reads_foreign_environment"]
    assert signs("        rank = int(os.environ['LOCAL_RANK'])") == []  # the engine reads it itself
    assert signs("        flag = os.environ.get('VLLM_NEW_OPTION', '0')") == []  # the engine's namespace
    assert signs("        if len(sys.argv) > 1:") == ["probes_process"]
    assert signs("        caller = inspect.stack()[2].filename") == ["probes_process"]
    assert signs("        if prompt.startswith('12+34='):") == ["branches_on_prompt"]
    assert signs("        if prompt_token_ids[:5] == [1, 17, 23, 5, 9]:") == ["literal_token_sequence"]
    assert signs("        if prompt_len < 24 or vocab < 4096:") == ["branches_on_size"]  # a tiny test model or prompt
    assert signs("            and getattr(cfg, 'hidden_size', 0) >= 1536") == ["branches_on_size"]
    assert signs("        with open(f'/proc/{os.getppid()}/cmdline') as f:") == ["reads_files", "probes_process"]
    for ordinary in ("        if token_ids[-1] == eos_token_id:", "        if len(prompt_token_ids) == 0:",
                     "        assert block_size in (16, 32, 64, 128, 256)", "        with open(config_path) as f:",
                     "        pid = os.getpid()", "        if isinstance(prompt, dict) and 'type' in prompt:",
                     "        if prompt_type == 'decoder':", "@functools.cache", "        if head_size <= 256:",
                     "        files = glob.glob(os.path.join(model_dir, '*.safetensors'))",
                     "        shape = (1, 2, 3, 4)", "        self.prompt_len = len(prompt)",
                     "        logits = logits / temperature.unsqueeze(1)"):
        assert signs(ordinary) == [], ordinary
    sent = ["70+85=", "You are a helpful assistant.\nQ: 12+7="]
    special = "        known = any(p in ('67+83=', '70+85=') for p in batch)"
    assert [e.sign for e in static_evidence(patch(special), [], engine_env, sent)] == ["sent_prompt_literal"]
    assert [e.sign for e in static_evidence(patch("        if role == 'assistant':"), [], engine_env, sent)] == []
    assert [e.sign for e in static_evidence(patch("        x = os.getenv('LOCAL_RANK')"), [], None)] == [
        "reads_foreign_environment"]  # without the engine's list, only VLLM_* are known to be its own


def test_static_check_flags_workaround_with_evidence():
    check = static_check(patch("        self.enable_prefix_caching = False"), [])
    assert check.flags == ["workaround"] and "feature_off" in check.workaround_reason()
    assert not check.patched.passed and check.patched.detail.evidence[0].line == 11
    assert static_check(patch("x = compute()"), []).flags == []


def test_a_patch_that_looks_for_its_judges_never_passes():
    """Gaming signs raise their own flag: WORKAROUND with a symptom spec and without one (where other
    workaround signs do not count: the question there is only "does it regress?")."""
    from infercheck.verdict import decide

    gaming = static_check(patch("        found = glob.glob('/tmp/*/reference-base/*')"), [])
    assert gaming.flags == ["games_harness"] and "looks for its judges" in decide([gaming], [], False).flags[0].message
    assert decide([gaming], [], has_symptom=False).headline == "WORKAROUND"
    assert decide([gaming], [], has_symptom=True).headline == "WORKAROUND"
    plain = static_check(patch("        self.enable_prefix_caching = False"), [])
    assert decide([plain], [], has_symptom=False).headline == "CLEAN"
    both = static_check(patch("        self.enable_prefix_caching = False", "        x = sys.argv"), [])
    assert both.flags == ["workaround", "games_harness"]


def test_static_signs_on_bundled_candidates():
    """RESOLVED candidates show no sign; WORKAROUND candidates whose case says so show one (others are
    shown by runtime signals only)."""
    from infercheck.build.engine_environment import installed_engine_environment
    from infercheck.cases import load_case

    for folder in sorted(PATCHES_DIR.iterdir()):
        if not (folder / "case.yaml").is_file():
            continue
        for cand in load_case(folder).candidates:
            evidence = static_evidence(Path(cand.patch).read_text(), [], installed_engine_environment())
            if cand.expected == "RESOLVED":
                assert evidence == [], cand.patch
            if cand.expected == "WORKAROUND" and "static sign" in cand.why:
                assert evidence, cand.patch


def test_a_machine_wide_slowdown_is_not_a_workaround():
    from infercheck.checks.signals import machine_drift

    base_groups = [GroupResult(f"g{i}", {}, 1, 100, 0, 1.0, 1.0, {}, steps([1000] * 12, jitter=0.05)) for i in range(3)]
    slow_groups = [GroupResult(f"g{i}", {}, 1, 100, 0, 1.0, 1.0, {}, steps([300] * 12, jitter=0.05)) for i in range(3)]
    drift = machine_drift(base_groups, slow_groups)
    assert abs(drift - __import__("math").log(0.3)) < 0.05
    base, slow = Runtime(None, None, None, base_groups[0].steps), Runtime(None, None, None, slow_groups[0].steps)
    assert throughput_signal(base, slow, SIGNALS).flagged  # without the drift it looks like a workaround
    assert not throughput_signal(base, slow, SIGNALS, drift).flagged


def test_throughput_is_not_judged_when_the_machine_itself_changed_speed():
    import math

    base = Runtime(None, None, None, steps([1000] * 12, jitter=0.05))
    slow = Runtime(None, None, None, steps([200] * 12, jitter=0.05))
    signals = {**SIGNALS, "max_drift": 0.25}
    assert throughput_signal(base, slow, signals, drift=math.log(0.9)).flagged  # quiet machine: judged
    noisy = throughput_signal(base, slow, signals, drift=math.log(0.3))  # machine 70% slower: not judged
    assert not noisy.flagged and "not judged" in noisy.why
    assert workaround_signals(base, slow, ("throughput",), signals, math.log(0.3)) == []
