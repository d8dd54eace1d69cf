from infercheck.code_paths import (Bypass, body_spans, bypassed_functions, changed_hunks, function_spans, functions_at,
                                   functions_run, hunk_executed,
                                   statement_lines)

SOURCE = '''import x

def top(a):
    return a

class Sampler:
    limit = 3

    @staticmethod
    def forward(logits):
        def inner(v):
            return v
        return inner(logits)
'''


def test_lines_map_to_their_innermost_function():
    assert [s[2] for s in function_spans(SOURCE)] == ["top", "Sampler.forward", "Sampler.forward.inner"]
    assert functions_at(SOURCE, [1, 4, 7]) == {"top"}  # module and class level count for none
    assert functions_at(SOURCE, [9, 12]) == {"Sampler.forward", "Sampler.forward.inner"}  # the decorator line too
    assert functions_at(SOURCE, [13]) == {"Sampler.forward"}


BASE = '''def sample(logits, k):
    """Top-k."""
    if k:
        logits = fast_top_k(logits,
                            k)
    return logits


def fast_top_k(logits, k):
    return logits[:k]


def unused():
    return 0
'''


def test_hunks_come_from_the_files_as_run_whatever_the_patch_offsets():
    patched = BASE.replace("                            k)", "                            k + 1)").replace(
        "def unused():\n    return 0\n", "")
    hunks = changed_hunks("vllm/s.py", BASE, patched)
    assert [(h.base_start, h.base_end, h.patched_start, h.patched_end) for h in hunks] == [(5, 6, 5, 6), (13, 15, 13, 13)]
    assert hunks[0].name == "vllm/s.py:-5,1 +5,1"
    new_file = changed_hunks("vllm/new.py", "", "x = 1\n")
    assert [(h.base_start, h.base_end, h.patched_start, h.patched_end) for h in new_file] == [(1, 1, 1, 2)]


def test_a_changed_continuation_line_belongs_to_its_statement_a_body_line_not_to_its_header():
    assert statement_lines(BASE, 5, 6) == {4}  # the call starts on line 4; coverage reports line 4
    assert statement_lines(BASE, 3, 4) == {3}  # the `if` header, not its body
    assert statement_lines(BASE, 2, 3) == set()  # a docstring is never reported as run
    assert statement_lines(BASE, 12, 12) == set()  # an empty range


def test_a_hunk_is_executed_by_its_added_lines_on_patched_or_its_removed_lines_on_base():
    patched = BASE.replace("                            k)", "                            k + 1)")
    (hunk,) = changed_hunks("vllm/s.py", BASE, patched)
    assert hunk_executed(hunk, BASE, patched, base_lines=set(), patched_lines={1, 3, 4, 6}) is True
    assert hunk_executed(hunk, BASE, patched, base_lines={1, 3, 6}, patched_lines={1, 3, 6}) is False  # k falsy
    deleted = BASE.replace("def unused():\n    return 0\n", "")
    (gone,) = changed_hunks("vllm/s.py", BASE, deleted)
    assert hunk_executed(gone, BASE, deleted, base_lines={14}, patched_lines=set()) is True
    assert hunk_executed(gone, BASE, deleted, base_lines={1}, patched_lines=set()) is False
    doc = BASE.replace('"""Top-k."""', '"""Top-k of the logits."""')
    (doc_hunk,) = changed_hunks("vllm/s.py", BASE, doc)
    assert hunk_executed(doc_hunk, BASE, doc, {1, 2, 3}, {1, 2, 3}) is None  # nothing that runs changed


def test_a_function_base_ran_and_patched_never_runs_is_bypassed_a_removed_one_is_not():
    # The workaround: the call to the fast path is gone, the function stays.
    patched = BASE.replace("        logits = fast_top_k(logits,\n                            k)\n",
                           "        logits = logits[:k]\n")
    base_runs = {"app/sampler": {1, 3, 4, 6, 10}, "parity": {1, 3, 6}}
    patched_runs = {"app/sampler": {1, 3, 4, 5}, "parity": {1, 3, 5}}
    assert bypassed_functions("vllm/s.py", BASE, patched, base_runs, patched_runs) == [
        Bypass("vllm/s.py", "fast_top_k", ("app/sampler",))]
    # Still run by some check on patched: not bypassed.
    assert bypassed_functions("vllm/s.py", BASE, BASE, base_runs, {"app/sampler": {3}, "parity": {10}}) == []
    # Removed by the patch (a rewrite): not bypassed; a check with no patched run is not judged.
    removed = patched.replace("def fast_top_k(logits, k):\n    return logits[:k]\n", "")
    assert bypassed_functions("vllm/s.py", BASE, removed, base_runs, patched_runs) == []
    assert bypassed_functions("vllm/s.py", BASE, patched, base_runs, {"parity": {1, 3, 5}}) == []


def test_a_function_ran_when_its_body_ran_not_when_its_def_line_ran_at_import():
    assert [s[2] for s in body_spans(SOURCE)] == ["top", "Sampler.forward", "Sampler.forward.inner"]
    assert functions_run(SOURCE, [3, 9, 10]) == set()  # def lines and a decorator: import time
    assert functions_run(SOURCE, [4]) == {"top"}
    assert functions_run(SOURCE, [11, 13]) == {"Sampler.forward"}  # defining inner is forward's work
    assert functions_run(SOURCE, [12]) == {"Sampler.forward.inner"}
