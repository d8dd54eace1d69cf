"""Classify engine-tree paths: python / compiled / tests / docs / config."""

from __future__ import annotations

from fnmatch import fnmatch

COMPILED_GLOBS = ("csrc/*", "*.cu", "*.cuh", "*.cpp", "*.cc", "*.c", "*.h", "*.hpp",
                  "CMakeLists.txt", "*/CMakeLists.txt", "cmake/*", "setup.py", "*.so")
TEST_GLOBS = ("tests/*", "*/tests/*", "test_*.py", "*/test_*.py", "*_test.py", "conftest.py", "*/conftest.py")
DOC_GLOBS = ("docs/*", "*.md", "*.rst", "*.txt")
CONFIG_GLOBS = (".github/*", ".buildkite/*", "*.toml", "*.cfg", "*.ini", "*.yaml", "*.yml", "*.json",
                "requirements*", "Dockerfile*", "docker/*")


def classify_path(path: str) -> str:
    """One class per path; compiled wins over everything (it decides the build strategy)."""
    for cls, globs in (("compiled", COMPILED_GLOBS), ("tests", TEST_GLOBS), ("docs", DOC_GLOBS),
                       ("config", CONFIG_GLOBS)):
        if any(fnmatch(path, g) for g in globs):
            return cls
    return "python" if path.endswith(".py") else "config"


def compiled_paths(paths: list[str]) -> list[str]:
    return [p for p in paths if classify_path(p) == "compiled"]
