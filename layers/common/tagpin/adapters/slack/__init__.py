"""Slack: requests from a Slack app (the Approve / Reject buttons of an approval request)."""
