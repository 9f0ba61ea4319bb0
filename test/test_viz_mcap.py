"""`evaluate --mcap-out`: read the MCAP back (mcap reader) and find the poses, the veto intervals topic,
one annotation per violation (a Log message and a metadata record), the DSL and the report."""

from __future__ import annotations

import json
from pathlib import Path

from mcap.reader import make_reader

from uav_debate_eval.cli import main
from uav_debate_eval.sim.scenarios import simulate
from uav_debate_eval.viz.scene import TOPICS


def test_evaluate_writes_an_annotated_mcap(tmp_path: Path):
    sim = simulate("formation", seed=0, faults=["near_miss", "overspeed"], duration_s=50.0)
    sim.write(tmp_path / "flight", formats=("csv",))
    mcap = tmp_path / "flight.mcap"
    code = main(["evaluate", str(tmp_path / "flight" / "trajectory.csv"), "--mission",
                 str(tmp_path / "flight" / "mission.yaml"), "--out", str(tmp_path / "out"), "--mcap-out", str(mcap),
                 "--quiet"])
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert code == 3 and report["violations"]
    with mcap.open("rb") as fh:
        reader = make_reader(fh)
        topics = {c.topic: c for c in reader.get_summary().channels.values()}
        msgs: dict[str, list] = {}
        for _schema, channel, message in reader.iter_messages():
            msgs.setdefault(channel.topic, []).append(message)
        fh.seek(0)
        metadata = [m for m in make_reader(fh).iter_metadata()]
    assert set(TOPICS.values()) <= set(topics)
    assert topics[TOPICS["poses"]].message_encoding == "protobuf"  # foxglove.PosesInFrame
    assert len(msgs[TOPICS["poses"]]) >= 490  # 50 s at 10 Hz
    veto = [json.loads(m.data) for m in msgs[TOPICS["veto"]]]
    assert [v["veto"] for v in veto] == [False] + [True, False] * (len(veto) // 2)
    assert len(veto) // 2 == len(report["verdict"]["veto_intervals"]) >= 1
    raised = [v for v in veto if v["veto"]]
    assert {v["constraint"] for v in raised} <= {x["constraint"] for x in report["violations"]}
    violations = [m for m in metadata if m.name.startswith("violation:")]
    assert len(violations) == len(report["violations"])
    assert sorted(m.metadata["constraint"] for m in violations) == sorted(v["constraint"] for v in report["violations"])
    assert len(msgs[TOPICS["annotations"]]) == len(report["violations"]) + len(report["events"])
    assert json.loads(msgs[TOPICS["report"]][0].data) == report
    assert json.loads(msgs[TOPICS["dsl"]][0].data)["text"] == report["dsl"]["text"]
    first = min(v["t_start"] for v in report["violations"])
    times = sorted(m.log_time for m in msgs[TOPICS["annotations"]])
    t0 = report["mission"].get("t0") or 0.0
    assert round((t0 + first) * 1e9) in times  # annotations sit at their flight time on the input clock
