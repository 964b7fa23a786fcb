"""Where the configuration document comes from: an SSM parameter (in AWS; cached by powertools
parameters) or a file (locally). The text is parsed by ``tagpin.domain.config.parse_config``.

An SSM Standard parameter holds 4 KB and is free; an Advanced one holds 8 KB and costs $0.05 a
month. A document too big for Standard is stored gzip-compressed and base64-encoded (YAML
compresses several times over), marked by ``COMPRESSED``; only what does not fit even then
goes to the Advanced tier, and what does not fit there is refused with a clear message
(``parameter_value``). ``ConfigLoader`` reads either form.
"""

from __future__ import annotations

import base64
import gzip
from dataclasses import dataclass
from pathlib import Path

from tagpin.domain.config import ConfigError, NotConfigured, TagpinConfig, parse_config

COMPRESSED = "tagpin-gzip-base64:"
STANDARD_LIMIT = 4096  # bytes of an SSM Standard parameter's value
ADVANCED_LIMIT = 8192  # bytes of an Advanced one ($0.05 per parameter-month)


@dataclass(frozen=True)
class ParameterValue:
    value: str
    tier: str  # "Standard" or "Advanced"
    compressed: bool


def parameter_value(text: str) -> ParameterValue:
    """How to store ``text`` in an SSM parameter: as it is when it fits the Standard tier, else
    compressed, else (compressed) in the Advanced tier; ``ConfigError`` when even that is too big."""
    if len(text.encode()) <= STANDARD_LIMIT:
        return ParameterValue(text, "Standard", compressed=False)
    packed = COMPRESSED + base64.b64encode(gzip.compress(text.encode(), mtime=0)).decode("ascii")
    if len(packed) <= STANDARD_LIMIT:
        return ParameterValue(packed, "Standard", compressed=True)
    if len(packed) <= ADVANCED_LIMIT:
        return ParameterValue(packed, "Advanced", compressed=True)
    raise ConfigError(
        f"the configuration is {len(text.encode())} bytes ({len(packed)} compressed); an SSM parameter "
        f"holds at most {ADVANCED_LIMIT} bytes: label workloads instead of listing their targets "
        "(docs/clusters.md), or split the images"
    )


def parameter_text(value: str) -> str:
    """The document stored by ``parameter_value``."""
    if value.startswith(COMPRESSED):
        return gzip.decompress(base64.b64decode(value.removeprefix(COMPRESSED))).decode()
    return value


class ConfigLoader:
    """Loads the configuration from an SSM parameter (cached ``max_age`` seconds) or a file.

    The parsed result is reused while the raw text is unchanged, so warm invocations pay nothing.
    """

    def __init__(self, *, parameter: str | None = None, file: str | None = None, max_age: int = 60) -> None:
        if (parameter is None) == (file is None):
            raise ConfigError("set exactly one of TAGPIN_CONFIG_PARAMETER or TAGPIN_CONFIG_FILE")
        self._parameter = parameter
        self._file = file
        self._max_age = max_age
        self._cached: tuple[str, TagpinConfig] | None = None

    def _text(self) -> str:
        if self._file is not None:
            try:
                return Path(self._file).read_text(encoding="utf-8")
            except FileNotFoundError:
                raise NotConfigured(f"the configuration file {self._file} does not exist") from None
        from aws_lambda_powertools.utilities import parameters

        try:
            value = parameters.get_parameter(self._parameter or "", decrypt=True, max_age=self._max_age)
        except parameters.GetParameterError as exc:
            if "ParameterNotFound" not in str(exc):
                raise
            raise NotConfigured(
                f"the configuration parameter {self._parameter} does not exist yet: "
                "write it with `tagpin config push FILE` (docs/deploying.md)"
            ) from None
        return parameter_text(value if isinstance(value, str) else str(value))

    def load(self) -> TagpinConfig:
        text = self._text()
        if self._cached is not None and self._cached[0] == text:
            return self._cached[1]
        config = parse_config(text, source=self._parameter or self._file or "configuration")
        self._cached = (text, config)
        return config
