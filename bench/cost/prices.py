"""Price: the list prices, the always-free allowances and the length of a month.

The monthly model (``model.py``) multiplies the measured figures by these; ``report.py`` writes
them into bench/results/cost.json beside the estimate.
"""

from __future__ import annotations

HOURS_PER_MONTH = 730  # AWS's convention for monthly estimates


# us-east-1, on-demand list prices (USD) from the AWS pricing pages as known on PRICE_DATE.
# Prices change: check https://aws.amazon.com/pricing/ before relying on these figures.
# Free tiers are NOT subtracted in the totals (see FREE_TIER and the "after free tier" column).
PRICE_DATE = "2025-06 (DynamoDB on-demand after the 2024-11-01 reduction)"
PRICES: dict[str, float] = {
    "lambda_gb_second": 0.0000166667,  # x86_64
    "lambda_gb_second_arm64": 0.0000133334,  # arm64 (Graviton), first 7.5 billion GB-s a month
    "lambda_request": 0.20 / 1e6,
    "dynamodb_wru": 0.625 / 1e6,  # on-demand write request unit (standard table class)
    "dynamodb_rru": 0.125 / 1e6,  # on-demand read request unit
    "dynamodb_storage_gb_month": 0.25,
    "dynamodb_pitr_gb_month": 0.20,  # continuous backups (the state table has PITR on)
    # https://aws.amazon.com/sqs/pricing/ : per request (each 64 KB chunk of a payload one request),
    # the first 100 billion a month; a queue is priced by its type (template.yaml: FifoQueue)
    "sqs_fifo_request": 0.50 / 1e6,
    "sqs_standard_request": 0.40 / 1e6,
    "secrets_manager_secret_month": 0.40,
    "secrets_manager_api_call": 0.05 / 10_000,
    "ssm_standard_parameter_month": 0.0,  # standard tier: no storage charge, standard throughput free
    "ssm_standard_api_call": 0.0,  # GetParameter at standard throughput (higher throughput: $0.05/10,000)
    "ssm_advanced_parameter_month": 0.05,
    "cloudwatch_alarm_month": 0.10,  # standard resolution, per alarm metric
    "cloudwatch_metric_month": 0.30,  # custom metrics (EMF), first 10,000 tier
    "cloudwatch_logs_ingest_gb": 0.50,
    "cloudwatch_logs_storage_gb_month": 0.03,
    "http_api_request": 1.00 / 1e6,  # first 300 million a month
    "eventbridge_scheduled_rule_event": 0.0,  # scheduled rules (AWS::Events::Rule) are free
    "xray_trace_recorded": 5.00 / 1e6,  # Tracing: Active
    "sns_publish": 0.50 / 1e6,  # rollout notifications
}
# Always-free allowances per month (account-wide: shared with everything else in the account).
FREE_TIER: dict[str, float] = {
    "lambda_requests": 1e6,
    "lambda_gb_seconds": 400_000,
    "sqs_requests": 1e6,
    "dynamodb_storage_gb": 25,
    "cloudwatch_alarms": 10,
    "cloudwatch_metrics": 10,
    "cloudwatch_logs_gb": 5,
    "xray_traces": 100_000,
}


def sqs_request_price(fifo: bool) -> float:
    """One SQS request on a FIFO or a standard queue."""
    return PRICES["sqs_fifo_request" if fifo else "sqs_standard_request"]
