"""Folding and word tokens used by search_concepts and search_sections."""

import unicodedata

from hypothesis import given, strategies as st

from knowspec.impl.rules.text import case_fold, has_letter_or_number, raw_tokens, unique_terms, words


def test_fold_makes_nfc_and_nfd_spellings_equal():
    assert case_fold("Café") == case_fold("CAFE\u0301") == "café"


def test_fold_expands_sharp_s_and_ffi_ligature():
    assert case_fold("Straße") == "strasse"
    assert case_fold("ﬃ") == "ffi"


def test_fold_has_no_turkic_special_case():
    assert case_fold("I") == "i"
    assert case_fold("İ") == "i\u0307"


def test_words_split_on_everything_but_letters_numbers_marks():
    assert words("Retry-budget, v2_x; e\u0301t\u00e9!") == ["retry", "budget", "v2", "x", "été"]


def test_words_keep_cyrillic_and_cjk():
    assert words("Повтор запросов 日本語") == ["повтор", "запросов", "日本語"]


def test_unique_terms_keep_first_occurrence_order():
    assert unique_terms("b a B c a") == ["b", "a", "c"]


def test_has_letter_or_number():
    assert has_letter_or_number("  -- 7 ")
    assert not has_letter_or_number(" ,.;\u0301 ")


def test_raw_tokens_give_spans_in_source_text():
    text = "See Straße here"
    toks = list(raw_tokens(text))
    assert [text[t.start:t.end] for t in toks] == ["See", "Straße", "here"]
    assert toks[1].norm == "strasse"


@given(st.text())
def test_fold_is_idempotent(text):
    assert case_fold(case_fold(text)) == case_fold(text)


@given(st.text())
def test_words_never_hold_separators(text):
    for w in words(text):
        assert w
        assert all(unicodedata.category(ch)[0] in "LNM" for ch in w)


def test_astral_letters_stay_inside_words():
    # U+1D400 MATHEMATICAL BOLD CAPITAL A is a letter outside the BMP; 😀 is not a letter
    assert words("x\U0001D400y 😀 z") == ["x\U0001D400y", "z"]
    assert words("plain bmp text") == ["plain", "bmp", "text"]
