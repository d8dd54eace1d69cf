from infercheck.code_paths import function_spans, functions_at

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
