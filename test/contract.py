"""Where the tests find the contract: the project's own copies (docs/CONTRACT.md, the schemas beside the report
writer). ../shared/spec is only where those copies come from; test_contract_copies checks them when it is there."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPORT_SCHEMA = str(ROOT / "uav_debate_eval" / "report" / "report.schema.json")
COMPARISON_SCHEMA = str(ROOT / "uav_debate_eval" / "report" / "comparison.schema.json")
CONTRACT = ROOT / "docs" / "CONTRACT.md"
SHARED_SPEC = ROOT.parent / "shared" / "spec"
