"""The panel's choices on the flight's findings: per finding how many final positions endorsed or disputed it
(matched across segments by the finding's `key`), and the flight's recommendations composed from them."""

from __future__ import annotations

from typing import Any


def _final_records(debate: Any) -> list[tuple[Any, Any]]:
    """(segment debate, response record) for every segment's last round."""
    out = []
    for seg in getattr(debate, "segments", []) or []:
        if seg.rounds:
            out += [(seg, r) for r in seg.rounds[-1].responses]
    return out


def apply_panel(findings: list, debate: Any) -> None:
    """Fill each flight finding's `panel` with {endorsed, disputed, reasons, picked} from the final rounds."""
    by_key = {f.key: f for f in findings}
    for seg, rec in _final_records(debate):
        local = {f.id: f for f in getattr(seg, "findings", []) or []}
        for c in rec.response.choices:
            f = by_key.get(getattr(local.get(c["id"]), "key", None))
            if f is None:
                continue
            p = f.panel or {"endorsed": 0, "disputed": 0, "reasons": [], "picked": 0}
            p["endorsed" if c["stance"] == "endorse" else "disputed"] += 1
            if c["reason"] not in p["reasons"]:
                p["reasons"].append(c["reason"])
            f.panel = p
        for text in rec.response.picked:
            for f in findings:
                if text in f.recommendations or any(_same(text, r) for r in f.recommendations):
                    f.panel = f.panel or {"endorsed": 0, "disputed": 0, "reasons": [], "picked": 0}
                    f.panel["picked"] += 1


def _same(a: str, b: str) -> bool:
    """Two candidates of the same finding differ only in the flight times of their scope."""
    return a.split(" (")[0] == b.split(" (")[0]


def recommendations(findings: list, limit: int = 4) -> list[str]:
    """The flight's recommendations: the first candidate of every hazard, then findings the panel picked or
    endorsed (most votes first), then the top findings' own; at most `limit`."""
    hazards = [f for f in findings if f.severity == "hazard"]
    chosen = sorted((f for f in findings if f.panel and f.severity != "hazard"),
                    key=lambda f: (-(f.panel.get("picked", 0) + f.panel.get("endorsed", 0)), findings.index(f)))
    chosen = [f for f in chosen if f.panel.get("picked") or f.panel.get("endorsed", 0) > f.panel.get("disputed", 0)]
    out = [f.recommendations[0] for f in [*hazards, *chosen, *findings] if f.recommendations]
    return list(dict.fromkeys(out))[:limit]
