"""The one reader of CloudFormation templates (tagpin_local.cfn): short tags in their long form, as
CloudFormation reads them, for the tools, the benchmarks and the tests alike; and no second one."""

from __future__ import annotations

import re
from pathlib import Path

from tagpin_local.cfn import load_template

from tests.support.constants import ROOT

TEMPLATE = """
Conditions:
  Enabled: !Not [!Equals [!Ref Mode, "off"]]
Resources:
  Fn:
    Condition: Enabled
    Properties:
      Role: !GetAtt FnRole.Arn
      Name: !Sub ${AWS::StackName}-fn
      Size: !If [Enabled, 1, !Ref AWS::NoValue]
      Both: !And [!Condition Enabled, !Condition Enabled]
      Queue: !GetAtt [Queue, Arn]
"""


def test_short_tags_are_read_in_their_long_form(tmp_path: Path) -> None:
    path = tmp_path / "template.yaml"
    path.write_text(TEMPLATE, encoding="utf-8")
    document = load_template(path)
    assert document["Conditions"]["Enabled"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": "Mode"}, "off"]}]}
    assert document["Resources"]["Fn"]["Properties"] == {
        "Role": {"Fn::GetAtt": ["FnRole", "Arn"]},
        "Name": {"Fn::Sub": "${AWS::StackName}-fn"},
        "Size": {"Fn::If": ["Enabled", 1, {"Ref": "AWS::NoValue"}]},
        "Both": {"Fn::And": [{"Condition": "Enabled"}, {"Condition": "Enabled"}]},
        "Queue": {"Fn::GetAtt": ["Queue", "Arn"]},
    }


def test_no_other_module_reads_cloudformation_tags_its_own_way() -> None:
    tags = re.compile(r"add_(multi_)?constructor\(\s*f?[\"']!")
    found = [
        str(path.relative_to(ROOT))
        for folder in ("tools", "bench", "tests", "layers", "functions")
        for path in (ROOT / folder).rglob("*.py")
        if tags.search(path.read_text(encoding="utf-8"))
    ]
    assert found == ["tools/tagpin_local/cfn.py"]
