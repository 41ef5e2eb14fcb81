"""The one language helper: messages are ``{"en": ..., "zh": ...}`` mappings,
and a language is whatever a user or client wrote (``zh-CN``, ``zh_cn``,
``Chinese``, ``en-US``); :func:`normalize_language` makes it ``"en"`` or
``"zh"`` and :func:`pick` chooses the text, English when there is no Chinese."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (no typing import on the CLI's start-up path)
    from typing import Mapping, Optional

LANGUAGES = ("en", "zh")


def is_chinese(lang: Optional[str]) -> bool:
    """Does ``lang`` (normalised or not: ``zh``, ``zh-CN``, ``zh_Hans``) ask for Chinese?"""
    return bool(lang) and str(lang).strip().lower().startswith("zh")


def pick(text: Mapping[str, str], lang: Optional[str]) -> str:
    """``text`` in ``lang``: the Chinese when asked for and present, else the English."""
    if is_chinese(lang) and text.get("zh"):
        return text["zh"]
    return text.get("en", "")


def normalize_language(value: Optional[str]) -> Optional[str]:
    """'zh-CN', 'zh_cn', 'zh-Hans', 'Chinese' → 'zh'; 'en-US' → 'en'; 'auto' → None-ish."""
    if value is None:
        return None
    v = str(value).strip().lower().replace("_", "-")
    if v.startswith("zh") or v in ("chinese", "中文"):
        return "zh"
    if v.startswith("en") or v in ("english",):
        return "en"
    if v in ("", "auto"):
        return "en"
    return None
