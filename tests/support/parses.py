"""The image references parsed while a test runs (``ImageRef.parse`` counted): for the tests that a
poll parses a followed tag's reference once, and when (test_poll_parsed, test_poll_refs)."""

from __future__ import annotations

import pytest
from tagpin.domain.refs import ImageRef


def counted_parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every text ``ImageRef.parse`` is given from now on, in order (the list grows as it parses)."""
    parsed: list[str] = []
    parse = ImageRef.parse.__func__  # type: ignore[attr-defined]

    def counted(cls: type[ImageRef], text: str) -> ImageRef:
        parsed.append(text)
        return parse(cls, text)  # type: ignore[no-any-return]

    monkeypatch.setattr(ImageRef, "parse", classmethod(counted))
    return parsed
