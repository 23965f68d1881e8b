"""opi.locate: a vector store's document found in the articles, exactly or with whitespace and case ignored."""
from opi.locate import Locator, Place, folded

ARTICLES = ["The mill opened in 1850.\nIt closed in 1901.", "Ships docked at the quay.  Sailors sang at night."]


def test_a_text_is_found_exactly_in_the_article_that_holds_it():
    locator = Locator(ARTICLES)
    assert locator.find("It closed in 1901.") == Place(0, 25, 43)
    assert locator.find("  Sailors sang at night. ") == Place(1, 27, 49)  # its surrounding whitespace left out
    assert ARTICLES[1][27:49] == "Sailors sang at night."


def test_whitespace_runs_and_case_are_ignored_when_the_exact_text_is_not_there():
    locator = Locator(ARTICLES)
    place = locator.find("opened in 1850. it CLOSED")  # a line break became a space, a capital a small letter
    assert place == Place(0, 9, 34) and ARTICLES[0][place.start:place.end] == "opened in 1850.\nIt closed"
    place = locator.find("the quay. Sailors")  # two spaces in the article, one in the document
    assert ARTICLES[1][place.start:place.end] == "the quay.  Sailors"


def test_a_text_in_no_article_or_across_two_is_not_found():
    locator = Locator(ARTICLES)
    assert locator.find("It closed in 1901. Ships docked") is None  # never across articles
    assert locator.find("a sentence nobody wrote") is None and locator.find("   ") is None


def test_folding_maps_every_character_back_to_the_original():
    text, offsets = folded("A  b\n\tC")
    assert text == "a b c" and offsets == [0, 1, 3, 4, 6, 7]
