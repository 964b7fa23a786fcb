"""Price: the list prices, the always-free allowances and the length of a month.

The monthly model (``model.py``) multiplies the measured figures by these; ``report.py`` writes
them into bench/results/cost.json beside the estimate.
"""

from __future__ import annotations

HOURS_PER_MONTH = 730  # AWS's convention for monthly estimates


# us-east-1 on-demand list prices (USD), each with where it was checked on 2026-11-27 (session 39,
# issue 26) and the date that source gives for it. The pages of aws.amazon.com in the search index
# are undated copies (some older than the price): where a dated secondary page agrees, both are named.
# Prices change: check https://aws.amazon.com/pricing/ before relying on these figures.
# Free tiers are NOT subtracted in the totals (the "after free tier" figure subtracts FREE_TIER).
PRICE_DATE = "2026-11 (checked against AWS's pages and dated summaries of them, 2025-05 to 2026-06)"
PRICES: dict[str, float] = {
    # Lambda: https://aws.amazon.com/lambda/pricing/ (undated copy); cloudchipr.com/blog/aws-lambda-pricing
    # (2024) and the tiers there: x86 $0.0000166667, Arm $0.0000133334 per GB-s for the first 6 / 7.5
    # billion GB-s a month, $0.20 per million requests, billed per 1 ms. Since 2025-08-01 the INIT phase
    # (cold start) of zip functions on managed runtimes is billed too (AWS Compute Blog, "AWS Lambda
    # standardizes billing for INIT Phase", 2025-04): not measured here (docs/cost.md, left out)
    "lambda_gb_second": 0.0000166667,  # x86_64
    "lambda_gb_second_arm64": 0.0000133334,  # arm64 (Graviton), first 7.5 billion GB-s a month
    "lambda_request": 0.20 / 1e6,
    # DynamoDB on-demand, Standard table class, after the 2024-11-01 halving: airbyte.com's
    # "DynamoDB pricing" and a 2025 summary on linkedin.com ($0.625 per million WRU, $0.125 per
    # million RRU; aws.amazon.com/dynamodb/pricing/on-demand found only as an undated copy without the
    # figures). Storage $0.25 per GB-month with 25 GB always free (aws.amazon.com/dynamodb/pricing/,
    # undated copy). PITR $0.20 per GB-month: not found in the stored pages (kept as before, unchecked)
    "dynamodb_wru": 0.625 / 1e6,  # on-demand write request unit (standard table class)
    "dynamodb_rru": 0.125 / 1e6,  # on-demand read request unit
    "dynamodb_storage_gb_month": 0.25,
    "dynamodb_pitr_gb_month": 0.20,  # continuous backups (the state table has PITR on)
    # SQS: cloudburn.io/blog/amazon-sqs-pricing (us-east-1 "as of March 2026") and
    # factualminds.com (June 2026): standard $0.40 per million requests (first 100 billion a month),
    # FIFO $0.50; each 64 KB chunk of a payload is one request (aws.amazon.com/sqs/features/); the
    # first million requests a month free, both types together. A request is priced by its queue's
    # type (template.yaml FifoQueue; a FIFO queue's name ends in .fifo)
    "sqs_fifo_request": 0.50 / 1e6,
    "sqs_standard_request": 0.40 / 1e6,
    # Secrets Manager ($0.40 a secret a month, $0.05 per 10,000 calls) and SSM Parameter Store
    # (standard parameters and standard throughput free, advanced $0.05 a month): not re-checked this
    # session (the template's default store is SSM, priced 0)
    "secrets_manager_secret_month": 0.40,
    "secrets_manager_api_call": 0.05 / 10_000,
    "ssm_standard_parameter_month": 0.0,  # standard tier: no storage charge, standard throughput free
    "ssm_standard_api_call": 0.0,  # GetParameter at standard throughput (higher throughput: $0.05/10,000)
    "ssm_advanced_parameter_month": 0.05,
    # CloudWatch: https://aws.amazon.com/cloudwatch/pricing/ (copy, free tier: 10 alarm metrics, 10
    # metrics, 5 GB of logs); $0.10 per standard-resolution alarm metric and $0.30 per custom metric
    # (first 10,000): signoz.io/guides/cloudwatch-pricing (2026-02); logs $0.50 per GB ingested,
    # $0.03 per GB-month stored: hykell.com (2026); Lambda's logs are "vended" logs since 2025-05-01,
    # tiered, the first 10 TB at the same $0.50 (duckbillgroup.com)
    "cloudwatch_alarm_month": 0.10,  # standard resolution, per alarm metric
    "cloudwatch_metric_month": 0.30,  # custom metrics (EMF), first 10,000 tier
    "cloudwatch_logs_ingest_gb": 0.50,
    "cloudwatch_logs_storage_gb_month": 0.03,
    # API Gateway HTTP API: $1.00 per million for the first 300 million, metered per 512 KB; its free
    # tier (1 million a month) only for a new account's first 12 months, so not in FREE_TIER
    # (awsforengineers.com, 2025-05-19; apigatewaycost.com)
    "http_api_request": 1.00 / 1e6,  # first 300 million a month
    # EventBridge: events from AWS services on the default bus (the schedules' rules) free, custom
    # events $1.00 per million (factualminds.com, June 2026). The template's schedules are
    # AWS::Events::Rule (SAM Type: Schedule), not EventBridge Scheduler ($1.00 per million after 14
    # million free a month)
    "eventbridge_scheduled_rule_event": 0.0,  # scheduled rules (AWS::Events::Rule) are free
    # X-Ray: $5.00 per million traces recorded, 100,000 free: not re-checked (Tracing off by default)
    "xray_trace_recorded": 5.00 / 1e6,  # Tracing: Active
    # SNS standard topics: $0.50 per million publishes (64 KB chunks), first million free; email
    # deliveries $2.00 per 100,000 (factualminds.com, June 2026)
    "sns_publish": 0.50 / 1e6,  # rollout notifications
}
# Always-free allowances per month (account-wide: shared with everything else in the account; the
# pages above). Not subtracted in the totals; the "after free tier" figure subtracts them.
FREE_TIER: dict[str, float] = {
    "lambda_requests": 1e6,
    "lambda_gb_seconds": 400_000,
    "sqs_requests": 1e6,
    "sns_publishes": 1e6,
    "dynamodb_storage_gb": 25,
    "cloudwatch_alarms": 10,
    "cloudwatch_metrics": 10,
    "cloudwatch_logs_gb": 5,
    "xray_traces": 100_000,
}


def sqs_request_price(fifo: bool) -> float:
    """One SQS request on a FIFO or a standard queue."""
    return PRICES["sqs_fifo_request" if fifo else "sqs_standard_request"]
