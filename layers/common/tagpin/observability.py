"""Logger and metrics, one of each per function (powertools; service name from the environment)."""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging import utils

logger = Logger()
metrics = Metrics(namespace="tagpin")
# The domain modules log through the standard library; give them the same JSON format.
utils.copy_config_to_registered_loggers(source_logger=logger, include={"tagpin"})
