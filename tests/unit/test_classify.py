import pytest

from infercheck.patch.classify import classify_path, compiled_paths


@pytest.mark.parametrize("path,cls", [
    ("vllm/v1/sample/sampler.py", "python"),
    ("csrc/cpu/attention.cpp", "compiled"),
    ("csrc/ops.h", "compiled"),
    ("vllm/attention/kernel.cu", "compiled"),
    ("CMakeLists.txt", "compiled"),
    ("setup.py", "compiled"),
    ("tests/samplers/test_sampler.py", "tests"),
    ("vllm/tests/conftest.py", "tests"),
    ("docs/usage.md", "docs"),
    ("README.md", "docs"),
    (".github/workflows/ci.yml", "config"),
    ("pyproject.toml", "config"),
])
def test_classify_path(path, cls):
    assert classify_path(path) == cls


def test_compiled_paths_picks_only_compiled():
    assert compiled_paths(["vllm/a.py", "csrc/b.cu", "docs/x.md"]) == ["csrc/b.cu"]
