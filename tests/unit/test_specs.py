"""YAML specs become records at load time: defaults filled in, and a wrong key or type is one line
naming the file and the key (suites, symptoms, apps, cases)."""

from __future__ import annotations

import pytest
import yaml

from infercheck.apps import load_app
from infercheck.cases import load_case
from infercheck.errors import InfercheckError
from infercheck.names import SuiteKind
from infercheck.suites import load_suite, load_suites, load_symptom


def write(path, data):
    path.write_text(yaml.safe_dump(data))
    return path


def test_bundled_suites_load_with_defaults():
    suites = load_suites()
    short = suites["parity/addition-short"]
    assert short.kind == SuiteKind.PARITY and short.max_tokens == 8 and short.top_k == 20 and short.prompts
    zero = suites["accuracy/addition-zero-shot"]
    assert (zero.task, zero.metric, zero.tolerance, zero.num_fewshot) == ("addition_sums", "exact_match", 0.05, 0)


@pytest.mark.parametrize("data, fragment", [
    ({"name": "x", "max_tokens": "many"}, 'field "max_tokens"'),
    ({"name": "x", "max_tokns": 8}, "unknown key(s) 'max_tokns'"),
    ({"name": "x", "kind": "accuracy"}, "kind 'accuracy' in a parity folder"),
])
def test_a_bad_suite_names_its_file_and_key(tmp_path, data, fragment):
    path = write(tmp_path / "x.yaml", data)
    with pytest.raises(InfercheckError) as err:
        load_suite(path, SuiteKind.PARITY)
    message = str(err.value)
    assert str(path) in message and fragment in message and "\n" not in message


def test_a_bad_app_names_its_file_and_key(tmp_path):
    good = {"name": "x", "workload": {"type": "prompts", "prompts": {"set": "addition-zero-shot", "count": 2}},
            "compare": ["reference"], "consistency": {"a": "x", "b": "y"}}
    app = load_app(write(tmp_path / "x.yaml", good))
    assert app.compare == ("reference",) and app.options_for("consistency") == {"a": "x", "b": "y"}
    assert app.record == () and app.engine_args == {} and app.description == ""
    with pytest.raises(InfercheckError, match=r'x\.yaml: .*field "engine_args"'):
        load_app(write(tmp_path / "x.yaml", {**good, "engine_args": [1, 2]}))
    with pytest.raises(InfercheckError, match=r"x\.yaml: unknown key\(s\) 'colour'"):
        load_app(write(tmp_path / "x.yaml", {**good, "colour": "red"}))
    with pytest.raises(InfercheckError, match="unknown comparator/record vibes"):
        load_app(write(tmp_path / "x.yaml", {**good, "compare": ["vibes"]}))


def test_a_bad_symptom_names_its_file_and_key(tmp_path):
    path = write(tmp_path / "s.yaml", {"criterion": {"type": "accuracy", "min": "high"}, "prompts": {"set": "x"}})
    with pytest.raises(InfercheckError, match=r's\.yaml: .*"criterion.min"'):
        load_symptom(path)


def test_a_bad_case_names_its_file_and_key(tmp_path):
    write(tmp_path / "case.yaml", {"candidates": [{"name": "a", "patch": "a.patch"}]})
    with pytest.raises(InfercheckError, match=r'case\.yaml: .*"candidates.expected"'):
        load_case(tmp_path)
