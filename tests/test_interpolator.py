"""The MDI's accuracies, computed once for Chapters 3 and 6 (`companion.book.chapters.interpolator`)."""

from companion.book.chapters import interpolator
from companion.tasks.boolean import FUNCTIONS


def test_the_mdi_interpolates_the_seen_set_and_scores_gotu_s_baselines():
    """The baselines GOTU and the mask paper report (75 % on 2Parity, wrong on every unseen point;
    87.5 % on 3-bit Majority), from the interpolator itself, and a perfect fit of each seen set."""
    assert interpolator.mdi("2parity") == 0.75
    assert interpolator.mdi("2parity", "unseen") == 0.0
    assert interpolator.mdi("maj3") == 0.875
    refs = interpolator.references()
    assert set(refs) == set(interpolator.READINGS)
    for reading in refs:
        assert set(refs[reading]) == set(FUNCTIONS)
        assert all(refs[reading][fn]["seen"] == 1.0 for fn in FUNCTIONS)  # an interpolator fits what it saw


def test_chapter_6_reads_the_same_numbers_chapter_3_tabulates():
    from companion.book.chapters import ch03_boolean as ch3
    from companion.book.chapters import ch06_referees as ch6

    assert ch3.references is interpolator.references and ch6.mdi is interpolator.mdi
