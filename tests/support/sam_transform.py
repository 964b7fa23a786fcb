"""template.yaml through the real SAM transform (aws-sam-translator, what CloudFormation runs for
``Transform: AWS::Serverless-2016-10-31``), for tests that must see what SAM generates: the HTTP
APIs' OpenAPI bodies, the functions' roles and managed policies, properties passed through.

aws-sam-translator lives in SAM CLI's virtualenv (.venv-sam, ``make validate``; its pydantic pin
clashes with the dev venv's), so :func:`transformed` runs this file there as a script: it reads
the template and the parameter values, puts ``s3://`` URIs where ``sam package`` would (CodeUri,
ContentUri), and prints the CloudFormation template as JSON.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SAM_PYTHON = ROOT / ".venv-sam" / "bin" / "python"


@functools.cache
def _transformed(parameters: str) -> dict[str, Any]:
    if not SAM_PYTHON.exists():
        import pytest

        message = "aws-sam-translator is not installed (.venv-sam: make validate installs it)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    done = subprocess.run(
        [str(SAM_PYTHON), __file__, str(ROOT / "template.yaml"), parameters],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "AWS_DEFAULT_REGION": "us-east-1", "SAM_CLI_TELEMETRY": "0"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def transformed(**parameters: str) -> dict[str, Any]:
    """The CloudFormation template SAM makes of template.yaml for these parameter values."""
    return _transformed(json.dumps(parameters, sort_keys=True))


def _main(template: str, parameters: str) -> None:  # pragma: no cover (runs in .venv-sam)
    from samtranslator.translator.transform import transform  # type: ignore[import-not-found]
    from samtranslator.yaml_helper import yaml_parse  # type: ignore[import-not-found]

    class NoManagedPolicies:  # every policy of the template is inline: nothing to look up in IAM
        def load(self) -> dict[str, str]:
            return {}

    document = yaml_parse(Path(template).read_text(encoding="utf-8"))
    for resource in document["Resources"].values():
        properties = resource.get("Properties", {})
        for key in ("CodeUri", "ContentUri"):
            if isinstance(properties.get(key), str):
                properties[key] = "s3://artifacts/" + properties[key].strip("/")
    print(json.dumps(transform(document, json.loads(parameters), NoManagedPolicies())))


if __name__ == "__main__":
    _main(sys.argv[1], sys.argv[2])
