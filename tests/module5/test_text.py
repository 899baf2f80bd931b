"""The tokenizer and batch sampler (``module5/text.py``) and the bundled Shakespeare
(``project/shakespeare_data.py``)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from module5.text import CharTokenizer, get_batch
from project.shakespeare_data import VALIDATION_WORKS, load_works, shakespeare_split

ALPHABET = "abc XYZ\n!.'"


@pytest.mark.task5_4
@given(st.text(alphabet=ALPHABET, min_size=1))
def test_encode_then_decode_is_the_text(text: str) -> None:
    tok = CharTokenizer(ALPHABET)
    ids = tok.encode(text)
    assert ids.dtype == np.int64 and len(ids) == len(text)
    assert tok.decode(ids) == text


@pytest.mark.task5_4
def test_tokens_are_the_sorted_characters_and_strangers_are_refused() -> None:
    tok = CharTokenizer("banana")
    assert tok.vocab_size == 3 and list(tok.encode("abn")) == [0, 1, 2]
    with pytest.raises(ValueError, match="'z' is not in the vocabulary of 3 characters"):
        tok.encode("baz")
    with pytest.raises(ValueError, match=r"token 3 is outside the vocabulary \[0, 3\)"):
        tok.decode([0, 3])


@pytest.mark.task5_4
def test_a_batch_is_windows_and_their_next_tokens() -> None:
    data = np.arange(100) * 3
    x, y = get_batch(data, 6, 10, np.random.default_rng(0))
    assert x.shape == y.shape == (6, 10)
    np.testing.assert_array_equal(y[:, :-1], x[:, 1:])
    np.testing.assert_array_equal(np.diff(x, axis=1), 3)
    assert x.max() <= 98 * 3 and y.max() <= 99 * 3
    with pytest.raises(ValueError, match="need more than block_size 10"):
        get_batch(data[:10], 1, 10, np.random.default_rng(0))


def test_the_bundled_works_and_their_split() -> None:
    works = load_works()
    assert len(works) == 42 and "hamlet" in works
    assert works["hamlet"].startswith("HAMLET, PRINCE OF DENMARK")
    assert all(t.isascii() for t in works.values())
    train, val = shakespeare_split()
    assert len(val) == 458_501 and len(train) == 4_598_777
    for name in VALIDATION_WORKS:
        assert works[name] in val and works[name] not in train
    assert len(CharTokenizer("".join(works.values())).chars) == 84
