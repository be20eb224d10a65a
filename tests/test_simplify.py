"""hapflow.simplify: what the simplifier folds, and that folding keeps what the code computes."""
import ast

import numpy as np

from hapflow.simplify import simplify


def _simplified(src: str, names: set[str]) -> str:
    return ast.unparse(ast.Module(simplify(ast.parse(src).body, names), []))


def _run(src: str) -> np.ndarray:
    f = np.arange(40.0)
    exec(src, {"f": f, "b1": 3, "b6": 20})
    return f


# A kernel writing two ports reuses one counter name for both loops (sizes 2 and 1).
TWO_LOOPS = """\
for c1_i in range(2):
    f[b6 + (1 + c1_i + (2 if c1_i < 0 else 0))] = f[b1 + (6 + c1_i + (33 if 6 + c1_i < 0 else 0))]
for c1_i in range(1):
    f[b6 + (5 + c1_i + (1 if c1_i < 0 else 0))] = f[b1 + (18 + c1_i + (33 if 18 + c1_i < 0 else 0))]
"""


def test_a_counter_shared_by_loops_is_still_a_counter_and_one_trip_loops_unroll():
    text = _simplified(TWO_LOOPS, {"c1_i"})
    assert text.splitlines() == ["for c1_i in range(2):",
                                 "    f[b6 + (c1_i + 1)] = f[b1 + (c1_i + 6)]",
                                 "f[b6 + 5] = f[b1 + 18]"]
    assert np.array_equal(_run(text), _run(TWO_LOOPS))


# Multisine's kernel names its parameter offsets in one tuple (``amp, omega = (2, 5)``).
NAMED_OFFSETS = """\
c2_amp, c2_omega = (2, 5)
for c2_k in range(3):
    f[b6 + c2_k] = f[b1 + (15 + (c2_amp + c2_k) + (11 if c2_amp + c2_k < 0 else 0))] \\
        * f[b1 + (15 + (c2_omega + c2_k) + (11 if c2_omega + c2_k < 0 else 0))]
"""


def test_offsets_named_in_a_tuple_of_constants_fold_into_the_index():
    text = _simplified(NAMED_OFFSETS, {"c2_amp", "c2_omega", "c2_k"})
    assert text.splitlines() == ["for c2_k in range(3):",
                                 "    f[b6 + c2_k] = f[b1 + (c2_k + 17)] * f[b1 + (c2_k + 20)]"]
    assert np.array_equal(_run(text), _run(NAMED_OFFSETS))


def test_a_counter_read_after_its_loops_keeps_them():
    src = "for j in range(1):\n    f[j] = 1.0\nf[2] = j\n"
    assert _simplified(src, {"j"}) == src.strip()


def test_a_loop_nested_in_one_over_the_same_name_is_left_alone():
    src = "for j in range(1):\n    for j in range(3):\n        f[j] = 2.0\n"
    text = _simplified(src, {"j"})
    assert text == src.strip()
    assert np.array_equal(_run(text), _run(src))


def test_a_counter_also_assigned_elsewhere_may_be_negative():
    src = "j = k - 5\nfor j in range(2):\n    f[b1 + (j + (4 if j < 0 else 0))] = 1.0\n"
    assert "if j < 0" in _simplified(src, {"j"})


# TransferFunction's update names where b0 and a0 are from its state size:
# ``b, a = TF.coefficients, TF.coefficients + n + 1`` with ``n = d.size``, inlined for n = 1.
OFFSETS_AFTER_FOLDING = """\
c1_n = 1
c1_b, c1_a = (0, 0 + c1_n + 1)
c1_yk = f[b1 + (c1_b + 31 + (4 if c1_b < 0 else 0))] * f[b6] + f[b1 + 6]
f[b1 + 6] = f[b1 + (c1_b + 32 + (4 if c1_b + 1 < 0 else 0))] * f[b6] \\
    - f[b1 + (c1_a + 32 + (4 if c1_a + 1 < 0 else 0))] * c1_yk
"""


def test_a_tuple_that_folds_to_constants_is_folded_into_the_index_too():
    text = _simplified(OFFSETS_AFTER_FOLDING, {"c1_n", "c1_b", "c1_a", "c1_yk"})
    assert text.splitlines() == [
        "c1_yk = f[b1 + 31] * f[b6] + f[b1 + 6]",
        "f[b1 + 6] = f[b1 + 32] * f[b6] - f[b1 + 34] * c1_yk"]
    assert np.array_equal(_run(text), _run(OFFSETS_AFTER_FOLDING))


def test_a_one_trip_loop_around_a_branch_on_its_counter_unrolls_to_the_taken_branch():
    # the branch folds only once the counter is read as the constant
    src = "for j in range(1):\n    if j == 0:\n        f[j + 4] = 2.0\n    else:\n        f[j] = 1.0\n"
    text = _simplified(src, {"j"})
    assert text == "f[4] = 2.0"
    assert np.array_equal(_run(text), _run(src))
