"""Where the configuration document comes from: an SSM parameter (in AWS; cached by powertools
parameters) or a file (locally). The text is parsed by ``tagpin.domain.config.parse_config``."""

from __future__ import annotations

from pathlib import Path

from tagpin.domain.config import ConfigError, NotConfigured, TagpinConfig, parse_config


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
        return value if isinstance(value, str) else str(value)

    def load(self) -> TagpinConfig:
        text = self._text()
        if self._cached is not None and self._cached[0] == text:
            return self._cached[1]
        config = parse_config(text, source=self._parameter or self._file or "configuration")
        self._cached = (text, config)
        return config
