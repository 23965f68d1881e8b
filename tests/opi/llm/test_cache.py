"""opi.llm.cache: the persistent SQLite call cache and its keys."""
import hashlib
import threading

from opi.llm.cache import CallCache, call_key


def test_an_answer_put_is_got_back(tmp_path):
    cache = CallCache(tmp_path / "calls.sqlite")
    assert cache.get("k") is None and len(cache) == 0
    cache.put("k", {"content": "Über 1850 — yes", "usage": {"prompt_tokens": 3}})
    assert cache.get("k") == {"content": "Über 1850 — yes", "usage": {"prompt_tokens": 3}}
    assert len(cache) == 1


def test_the_first_answer_stays(tmp_path):
    cache = CallCache(tmp_path / "calls.sqlite")
    cache.put("k", {"content": "first"})
    cache.put("k", {"content": "second"})  # two processes made the same call: both valid, the first is kept
    assert cache.get("k") == {"content": "first"} and len(cache) == 1


def test_two_caches_on_one_file_see_each_others_answers(tmp_path):
    path = tmp_path / "nested" / "calls.sqlite"  # its folder is made
    one, other = CallCache(path), CallCache(path)
    one.put("a", {"content": "from one"})
    other.put("b", {"content": "from the other"})
    assert other.get("a") == {"content": "from one"} and one.get("b") == {"content": "from the other"}
    assert len(CallCache(path)) == 2  # committed at once: a new process sees them


def test_threads_share_a_cache(tmp_path):
    cache = CallCache(tmp_path / "calls.sqlite")
    threads = [threading.Thread(target=lambda i=i: cache.put(f"k{i}", {"n": i})) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [cache.get(f"k{i}") for i in range(8)] == [{"n": i} for i in range(8)]


def test_call_key_is_the_sha256_of_the_sorted_utf8_json():
    """Every cache written so far was keyed this way: another format would make every cached call a miss."""
    written = '{"a": null, "b": [1, "é"]}'  # keys sorted, non-ASCII kept, json.dumps' separators
    assert call_key({"b": [1, "é"], "a": None}) == hashlib.sha256(written.encode("utf-8")).hexdigest()
    assert call_key({"model": "m", "temperature": 0}) == call_key({"temperature": 0, "model": "m"})
    assert call_key({"model": "m", "temperature": 0}) != call_key({"model": "m", "temperature": 0.7})
    assert call_key({"messages": [{"content": "é"}]}) != call_key({"messages": [{"content": "e"}]})


def test_a_cache_deleted_during_a_run_is_made_again_and_keeps_what_comes_after(tmp_path, caplog):
    cache = CallCache(tmp_path / "cache" / "calls.sqlite")
    cache.put("before", {"content": "1"})
    for path in (tmp_path / "cache").iterdir():  # the user deletes the cache folder's files mid-run
        path.unlink()
    assert cache.get("before") is None  # that reply went with the file
    assert "was deleted or replaced during the run: made again" in caplog.text
    cache.put("after", {"content": "2"})
    assert CallCache(tmp_path / "cache" / "calls.sqlite").get("after") == {"content": "2"}  # on disk, for others
