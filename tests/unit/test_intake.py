import pytest

from infercheck.errors import InfercheckError
from infercheck.patch.intake import read_patch

GOOD = """--- a/vllm/x.py
+++ b/vllm/x.py
@@ -1 +1 @@
-a = 1
+a = 2
"""


def write(tmp_path, text, name="p.patch", mode="w"):
    path = tmp_path / name
    with open(path, mode) as fh:
        fh.write(text)
    return path


def test_good_patch_lists_files(tmp_path):
    patch = read_patch(write(tmp_path, GOOD))
    assert patch.files == ("vllm/x.py",)
    assert patch.classes == {"vllm/x.py": "python"}


@pytest.mark.parametrize("text,mode,message", [
    ("", "w", "empty"),
    ("   \n", "w", "empty"),
    (b"\x00\x01binary", "wb", "binary"),
    ("hello, not a diff\n", "w", "no file diffs"),
    (GOOD.replace("vllm/x.py", "../etc/passwd"), "w", "outside the engine tree"),
    ("--- /etc/passwd\n+++ /etc/passwd\n@@ -1 +1 @@\n-a\n+b\n", "w", "outside the engine tree"),
    ("diff --git a/vllm/l b/vllm/l\nnew file mode 120000\n--- /dev/null\n+++ b/vllm/l\n@@ -0,0 +1 @@\n+/etc\n",
     "w", "symlink"),
    ("diff --git a/vllm/x.bin b/vllm/x.bin\nGIT binary patch\nliteral 1\n", "w", "binary hunks"),
])
def test_bad_patches_refused_with_one_line(tmp_path, text, mode, message):
    with pytest.raises(InfercheckError) as err:
        read_patch(write(tmp_path, text, mode=mode))
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_missing_patch(tmp_path):
    with pytest.raises(InfercheckError, match="patch not found"):
        read_patch(tmp_path / "nope.patch")


def test_directory_is_not_a_patch(tmp_path):
    with pytest.raises(InfercheckError, match="not a file"):
        read_patch(tmp_path)
