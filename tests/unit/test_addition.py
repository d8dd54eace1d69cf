from infercheck.models import addition
from infercheck.paths import DATA_DIR

DATA = DATA_DIR / "addition"


def test_splits_are_disjoint_and_cover_all_pairs():
    splits = addition.split_examples()
    sizes = {k: len(v) for k, v in splits.items()}
    assert sizes == {"test": 500, "fewshot": 100, "train": 9400}
    seen = [set(splits[k]) for k in ("test", "fewshot", "train")]
    assert not (seen[0] & seen[1]) and not (seen[0] & seen[2]) and not (seen[1] & seen[2])


def test_split_matches_the_committed_data_files(tmp_path):
    """The split is rebuilt from its seed, here, and must equal the files the models were trained
    and measured on (suites/data/addition/): byte for byte, every split."""
    written = addition.write_splits(tmp_path)
    for name, path in written.items():
        committed = DATA / path.name
        assert committed.is_file(), committed
        assert path.read_bytes() == committed.read_bytes(), name
    assert [e for e in addition.load_split(DATA / "test.jsonl")] == addition.split_examples()["test"]


def test_example_text():
    assert addition.Example(99, 7).text == "99+07=106\n"
    assert (addition.Example(3, 4).question, addition.Example(3, 4).answer) == ("03+04=", "007")


def test_many_shot_prompt_reaches_requested_length():
    splits = addition.split_examples()
    shots = addition.shots_for_length(splits["fewshot"], 420, offset=3)
    prompt = addition.many_shot_prompt(shots, splits["test"][0])
    assert len(prompt) >= 420 and prompt.endswith(splits["test"][0].question)
    assert prompt.count("\n") == len(shots)


def test_packed_sequence_starts_at_example_boundary():
    import random

    train = addition.split_examples()["train"]
    seq = addition.packed_sequence(random.Random(0), train, 100)
    assert len(seq) == 100
    first = seq.split("\n")[0]
    a, rest = first.split("+")
    b, total = rest.split("=")
    assert int(a) + int(b) == int(total)


def test_written_splits_round_trip(tmp_path):
    paths = addition.write_splits(tmp_path)
    assert addition.load_split(paths["test"]) == addition.split_examples()["test"]
