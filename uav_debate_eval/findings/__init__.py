"""Verified findings: the tool's own sentences about a flight, ranked, each with candidate recommendations."""

from uav_debate_eval.findings.catalogue import build_findings, rank
from uav_debate_eval.findings.model import SEVERITY, VerifiedFinding
from uav_debate_eval.findings.words import top_findings, verdict_sentence

__all__ = ["SEVERITY", "VerifiedFinding", "build_findings", "rank", "top_findings", "verdict_sentence"]
