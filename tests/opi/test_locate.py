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


def test_a_document_whose_inner_words_are_in_no_article_is_ruled_out_without_a_search():
    locator = Locator(ARTICLES)
    assert locator.could_hold("ill opened in 1850. It closed in 1901.")  # cut mid-word by its splitter: still held
    assert not locator.could_hold("A long paragraph from some other document in the collection entirely")
    assert locator.could_hold("too short to tell")  # fewer than seven words: searched
    long = " ".join(f"Word{i}" for i in range(400))
    assert Locator([long]).find(" ".join(long.split()[17:60]).upper()) is not None  # folded, inside a long text


def test_a_character_whose_lower_case_is_two_characters_keeps_the_offsets_right():
    article = "İstanbul had a harbour. Ships docked there every spring."
    place = Locator([article]).find("istanbul HAD a harbour.")  # 'İ' is not folded: no match, not a wrong span
    assert place is None
    place = Locator([article]).find("İSTANBUL had a HARBOUR. ships docked")
    assert article[place.start:place.end] == "İstanbul had a harbour. Ships docked"
