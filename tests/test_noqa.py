from gradguard.model.noqa import add_noqa, is_suppressed, parse_noqa


def test_parse_noqa_forms():
    assert parse_noqa("x = 1") is None
    assert parse_noqa("x = 1  # noqa") == ()
    assert parse_noqa("x = 1  # noqa: GG101") == ("GG101",)
    assert parse_noqa("x = 1  # NOQA:E501,GG102") == ("E501", "GG102")


def test_suppression_is_per_code():
    assert is_suppressed("h = f(h)  # noqa: GG101", "GG101")
    assert not is_suppressed("h = f(h)  # noqa: GG102", "GG101")
    assert is_suppressed("h = f(h)  # noqa", "GG101")


def test_add_noqa_merges_and_is_idempotent():
    assert add_noqa("h = f(h)", "GG101") == "h = f(h)  # noqa: GG101"
    assert add_noqa("h = f(h)  # noqa: E501", "GG101") == "h = f(h)  # noqa: E501, GG101"
    once = add_noqa("h = f(h)  # 隐状态", "GG101")
    assert once == "h = f(h)  # 隐状态  # noqa: GG101"
    assert add_noqa(once, "GG101") == once
    assert add_noqa("h = f(h)  # noqa", "GG101") == "h = f(h)  # noqa"
