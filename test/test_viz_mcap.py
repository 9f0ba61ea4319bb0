"""`evaluate --mcap-out`: read the MCAP back (mcap reader) and find the poses, the veto intervals topic,
one annotation per violation (a Log message and a metadata record), the DSL and the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
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


def test_the_annotated_mcap_replays_to_the_same_report(tmp_path: Path):
    """The raw poses ride in the MCAP (/<uav>/pose, CDR): `evaluate flight.mcap` is the same flight to the last bit."""
    from uav_debate_eval.io.flight_mcap import ODOM, read_flight_mcap
    from uav_debate_eval.io.loader import load_inputs

    sim = simulate("formation", seed=1, faults=["near_miss", "telemetry_dropout"], duration_s=40.0)
    sim.write(tmp_path / "flight", formats=("csv",))
    csv, mission = tmp_path / "flight" / "trajectory.csv", str(tmp_path / "flight" / "mission.yaml")
    mcap = tmp_path / "flight.mcap"
    assert main(["evaluate", str(csv), "--mission", mission, "--out", str(tmp_path / "a"), "--mcap-out", str(mcap),
                 "--quiet"]) == 3
    with mcap.open("rb") as fh:
        schemas = {c.topic: s.name for s, c, _ in make_reader(fh).iter_messages(topics=["/uav1/odom"])}
    assert schemas == {"/uav1/odom": ODOM}  # the CSV has measured velocities: Odometry carries them
    original, replayed = load_inputs([csv]), read_flight_mcap(mcap)
    assert replayed.uav_ids == original.uav_ids
    for u in original.uav_ids:
        assert abs(replayed.tracks[u].t + replayed.t0 - original.tracks[u].t - original.t0).max() < 1e-6
        assert (replayed.tracks[u].pos == original.tracks[u].pos).all()
        assert (replayed.tracks[u].vel == original.tracks[u].vel).all()
    assert main(["evaluate", str(mcap), "--mission", mission, "--out", str(tmp_path / "b"), "--quiet"]) == 3
    a, b = (json.loads((tmp_path / d / "report.json").read_text()) for d in ("a", "b"))
    assert b["verdict"]["label"] == a["verdict"]["label"] == "risky"
    assert [(v["constraint"], v["uavs"]) for v in b["violations"]] == \
        [(v["constraint"], v["uavs"]) for v in a["violations"]]
    for va, vb in zip(a["violations"], b["violations"], strict=True):
        assert abs(va["t_start"] - vb["t_start"]) < 1e-6 and abs(va["t_end"] - vb["t_end"]) < 1e-6
    assert [(f["kind"], f["uavs"], f["sentence"]) for f in b["findings"]] == \
        [(f["kind"], f["uavs"], f["sentence"]) for f in a["findings"]]


def test_an_mcap_without_poses_is_named_for_what_it_holds(tmp_path: Path):
    """Another tool's MCAP (no ROS 2 profile, nothing this tool reads) is not called an old flight MCAP of this tool
    (a real empty MCAP of RISE-Maritime/keelson was); an old flight MCAP (Foxglove channels, no raw poses) is."""
    import pytest
    from mcap.writer import Writer

    from uav_debate_eval.core import InputError
    from uav_debate_eval.io.loader import load_inputs

    def write(path: Path, topics: list[str]) -> Path:
        with path.open("wb") as fh:
            w = Writer(fh)
            w.start(profile="", library="another tool")
            schema = w.register_schema("Note", "jsonschema", b"{}")
            for k, topic in enumerate(topics):
                channel = w.register_channel(topic, "json", schema)
                w.add_message(channel, log_time=k, publish_time=k, data=b"{}")
            w.finish()
        return path

    with pytest.raises(InputError) as empty:
        load_inputs([write(tmp_path / "empty.mcap", [])])
    assert "no messages" in str(empty.value) and "written before" not in str(empty.value)
    with pytest.raises(InputError) as foreign:
        load_inputs([write(tmp_path / "ship.mcap", ["/ship/heading"])])
    assert "/ship/heading (Note)" in str(foreign.value) and "ros2 bag record -s mcap" in str(foreign.value)
    with pytest.raises(InputError, match="written before the flight MCAP carried its poses"):
        load_inputs([write(tmp_path / "old.mcap", [TOPICS["scene"], TOPICS["report"]])])



REAL = Path(__file__).parent / "fixtures" / "real"


@pytest.mark.parametrize(("log", "events"), [(REAL / "px4_mission_rtl" / "flight.ulg", 6),
                                             (REAL / "ardupilot" / "plane382_fragment.BIN", 14)])
def test_the_autopilots_events_ride_in_the_mcap(tmp_path: Path, log: Path, events: int):
    """A real log's arming and land detector (PX4 vehicle_status, vehicle_land_detected), modes and mission commands:
    what the autopilot said comes back from the flight MCAP with the samples, so the replay's report tells the same
    story (it told none before: poses only, and two parked vehicles were a pair again)."""
    from uav_debate_eval.io.flight_mcap import read_flight_mcap
    from uav_debate_eval.io.loader import load_inputs

    mcap = tmp_path / "flight.mcap"
    main(["evaluate", str(log), "--out", str(tmp_path / "a"), "--mcap-out", str(mcap), "--quiet"])
    original, replayed = load_inputs([log]), read_flight_mcap(mcap)
    assert len(original.ingest.log_events) == events
    back, sent = (sorted(log.ingest.log_events, key=lambda e: (round(e.t, 6), e.extra.get("label", "")))
                  for log in (replayed, original))  # in time order in the file
    assert [(e.type, e.uavs, e.extra, e.t_end, e.value) for e in back] == \
        [(e.type, e.uavs, e.extra, e.t_end, e.value) for e in sent]
    assert [e.t for e in back] == pytest.approx([e.t for e in sent], abs=1e-6)
    main(["evaluate", str(mcap), "--out", str(tmp_path / "b"), "--quiet"])
    a, b = (json.loads((tmp_path / d / "report.json").read_text()) for d in ("a", "b"))
    assert len(a["events"]) >= events
    assert [(e["type"], e["uavs"]) for e in b["events"]] == [(e["type"], e["uavs"]) for e in a["events"]]
    assert [e["t"] for e in b["events"]] == pytest.approx([e["t"] for e in a["events"]], abs=1e-3)


def test_the_vehicles_local_frames_ride_in_the_mcap(tmp_path: Path):
    """Two MAVROS vehicles, each in its own local frame from its own origin (2 m apart in the world, both at 0 in
    their frames): separation is not evaluable in the bag's report, and in its flight MCAP's replay (the replay read
    both as one frame before: a 0-m min_separation violation)."""
    from rosbags.typesys import Stores, get_typestore

    from uav_debate_eval.sim.recording import write_bag

    ts = get_typestore(Stores.ROS2_JAZZY)
    T, H, P = (ts.types[f"{p}/msg/{n}"] for p, n in (("builtin_interfaces", "Time"), ("std_msgs", "Header"),
                                                       ("geometry_msgs", "PoseStamped")))
    Pose, Pt, Q = (ts.types[f"geometry_msgs/msg/{n}"] for n in ("Pose", "Point", "Quaternion"))
    msgs = []
    for k in range(200):
        t = 100.0 + k / 10
        for u, east in (("uav1", 0.0), ("uav2", 0.02 * k)):  # two paths: not one vehicle recorded twice
            msg = P(H(T(int(t), round((t % 1) * 1e9)), "map"), Pose(Pt(east, 0.1 * k, min(k / 10, 5.0)), Q(0, 0, 0, 1)))
            msgs.append((f"/{u}/mavros/local_position/pose", "geometry_msgs/msg/PoseStamped", int(t * 1e9), msg))
    bag = write_bag(tmp_path / "bag", msgs, ts, "mcap")
    (tmp_path / "mission.yaml").write_text("constraints: {min_separation_m: 1.0}\n")
    mission, mcap = str(tmp_path / "mission.yaml"), tmp_path / "flight.mcap"
    main(["evaluate", str(bag), "--mission", mission, "--out", str(tmp_path / "a"), "--mcap-out", str(mcap),
          "--quiet"])
    main(["evaluate", str(mcap), "--mission", mission, "--out", str(tmp_path / "b"), "--quiet"])
    a, b = (json.loads((tmp_path / d / "report.json").read_text()) for d in ("a", "b"))
    for report in (a, b):
        assert not report["violations"]
        assert "frames_misaligned" in {f["kind"] for f in report["data_quality"]["findings"]}
    assert b["verdict"]["label"] == a["verdict"]["label"] == "inconclusive"  # min_separation not evaluable
    # nor is their "closeness" an event (it read "Recommend increasing the spacing of uav1 and uav2 (closest 0 m)")
    assert not [e for e in a["events"] if e["type"] == "proximity"]
    assert not [r for r in a["verdict"]["recommendations"] if "spacing" in r or "re-recording" in r]
    assert any(r.startswith("Recommend setting frames: {<vehicle>: {origin: ") and r.endswith(
        "so that min_separation can be checked for uav1 and uav2 (their local frames are placed by nothing).")
        for r in a["verdict"]["recommendations"])
    assert b["verdict"]["summary"] == a["verdict"]["summary"]


@pytest.mark.parametrize("log", ["plane423_center_0003.bin", "plane382_fragment.BIN", "sub41_nogps_small.BIN"])
def test_an_autopilot_logs_flight_mcap_replays_to_its_report(tmp_path: Path, log: str):
    """What a real log gives beside its positions (limit parameters, vehicle class, attitude and targets, GPS fixes,
    the estimator's invalid spans, the reader's findings) rides in the flight MCAP: its replay checks what the log's
    evaluation checked and says the same. Before, the replay had the poses and events only: plane382 read "safe",
    its replay "inconclusive: nothing was checked" (no limits), and every section of the three differed."""
    path = REAL / "ardupilot" / log
    mcap = tmp_path / "flight.mcap"
    main(["evaluate", str(path), "--out", str(tmp_path / "a"), "--mcap-out", str(mcap), "--quiet"])
    main(["evaluate", str(mcap), "--out", str(tmp_path / "b"), "--quiet"])
    a, b = (json.loads((tmp_path / d / "report.json").read_text()) for d in ("a", "b"))
    for key in ("verdict", "violations", "data_quality", "findings", "safety", "scores"):
        assert a[key] == b[key], key
    assert a["safety"]["margins"], "the log's limits were checked"


def test_a_flight_mcap_carries_its_mission(tmp_path: Path):
    """The flight MCAP carries the mission its flight was evaluated against: replayed from another folder without
    --mission, it gives the same report (the motion-capture bag's mission.yaml lies beside the bag only; before, the
    replay had no constraints: "safe" became "inconclusive"). --mission still wins."""
    import shutil

    flight = tmp_path / "flight"
    flight.mkdir()
    for name in ("crazyflie_vrpn_sine.bag", "mission.yaml"):
        shutil.copyfile(REAL / "mocap_vrpn" / name, flight / name)
    mcap = tmp_path / "elsewhere" / "flight.mcap"
    mcap.parent.mkdir()
    main(["evaluate", str(flight / "crazyflie_vrpn_sine.bag"), "--out", str(tmp_path / "a"), "--mcap-out", str(mcap),
          "--quiet"])
    main(["evaluate", str(mcap), "--out", str(tmp_path / "b"), "--quiet"])
    a, b = (json.loads((tmp_path / d / "report.json").read_text()) for d in ("a", "b"))
    assert a["mission"]["constraints"], "the bag's mission gave constraints"
    for key in ("verdict", "violations", "data_quality", "findings", "safety", "mission"):
        assert a[key] == b[key], key
    assert any("mission carried by the flight MCAP" in n for n in b["notes"])
    other = tmp_path / "other.yaml"
    other.write_text("constraints: {max_speed_mps: 0.1}\n")
    main(["evaluate", str(mcap), "--out", str(tmp_path / "c"), "--mission", str(other), "--quiet"])
    c = json.loads((tmp_path / "c" / "report.json").read_text())
    assert c["verdict"]["label"] == "risky" and {v["constraint"] for v in c["violations"]} == {"max_speed"}



def _rewrite(src: Path, dst: Path, **writer: object) -> Path:
    """`src`'s records again, in log-time order (every vehicle's channel interleaved), with the mcap library's
    writer options (chunk size, compression, which indexes)."""
    from mcap.writer import Writer

    with src.open("rb") as fh, dst.open("wb") as out:
        w = Writer(out, **writer)
        w.start(profile="", library="test")
        schemas: dict[int, int] = {}
        channels: dict[int, int] = {}
        for schema, channel, message in make_reader(fh).iter_messages():
            if schema is not None and schema.id not in schemas:
                schemas[schema.id] = w.register_schema(schema.name, schema.encoding, schema.data)
            if channel.id not in channels:
                channels[channel.id] = w.register_channel(channel.topic, channel.message_encoding,
                                                          schemas.get(channel.schema_id, 0))
            w.add_message(channels[channel.id], message.log_time, message.data, message.publish_time)
        w.finish()
    return dst


def test_a_flight_mcap_reads_alike_however_its_chunks_and_indexes_lie(tmp_path: Path):
    """The raw poses are located through the chunks' message indexes with numpy (the mcap library's time-ordered
    merge took 36 s and 3.4 GB for 1,024 vehicles x 120 s): a real log's flight MCAP rewritten in small interleaved
    chunks (a message index per chunk, compressed or not) and without any index (read record by record) replays to
    the same samples, autopilot events and report."""
    from mcap.writer import CompressionType, IndexType

    from uav_debate_eval.io.flight_mcap import read_flight_mcap

    mcap = tmp_path / "flight.mcap"
    main(["evaluate", str(REAL / "ardupilot" / "plane382_fragment.BIN"), "--out", str(tmp_path / "a"), "--mcap-out",
          str(mcap), "--quiet"])
    original = read_flight_mcap(mcap)
    assert len(original.ingest.log_events) == 14  # its STAT arming among them
    variants = {
        "small chunks": _rewrite(mcap, tmp_path / "small.mcap", chunk_size=1024, compression=CompressionType.LZ4),
        "uncompressed": _rewrite(mcap, tmp_path / "plain.mcap", chunk_size=2048, compression=CompressionType.NONE),
        "no index": _rewrite(mcap, tmp_path / "bare.mcap", index_types=IndexType.NONE, use_summary_offsets=False,
                             use_statistics=False, repeat_channels=False, repeat_schemas=False),
    }
    with variants["small chunks"].open("rb") as fh:
        assert len(make_reader(fh).get_summary().chunk_indexes) > 30
    main(["evaluate", str(mcap), "--out", str(tmp_path / "replay"), "--quiet"])
    expected = json.loads((tmp_path / "replay" / "report.json").read_text())
    for name, path in variants.items():
        again = read_flight_mcap(path)
        assert again.uav_ids == original.uav_ids and again.t0 == original.t0, name
        for u in original.uav_ids:
            a, b = original.tracks[u], again.tracks[u]
            assert (a.t == b.t).all() and (a.pos == b.pos).all() and (a.vel == b.vel).all(), (name, u)
        assert [e.to_dict() for e in again.ingest.log_events] == [e.to_dict() for e in original.ingest.log_events]
        main(["evaluate", str(path), "--out", str(tmp_path / name), "--quiet"])
        got = json.loads((tmp_path / name / "report.json").read_text())
        for key in ("verdict", "violations", "data_quality", "findings", "events", "safety"):
            assert got[key] == expected[key], (name, key)


def test_a_damaged_chunk_of_a_flight_mcap_costs_its_own_samples(tmp_path: Path):
    """As in a bag: a chunk whose checksum fails is skipped and said in a note; the rest of the flight is read."""
    from mcap.writer import CompressionType

    from uav_debate_eval.io.flight_mcap import read_flight_mcap

    mcap = tmp_path / "flight.mcap"
    main(["evaluate", str(REAL / "ardupilot" / "plane382_fragment.BIN"), "--out", str(tmp_path / "a"), "--mcap-out",
          str(mcap), "--quiet"])
    small = _rewrite(mcap, tmp_path / "small.mcap", chunk_size=2048, compression=CompressionType.NONE)
    whole = read_flight_mcap(small)
    with small.open("rb") as fh:
        summary = make_reader(fh).get_summary()
    raw = {c.id for c in summary.channels.values() if c.topic.endswith(("/pose", "/odom"))}
    chunk = [c for c in summary.chunk_indexes if raw & c.message_index_offsets.keys()][5]
    data = bytearray(small.read_bytes())
    data[chunk.chunk_start_offset + chunk.chunk_length - 40] ^= 0xFF  # inside the chunk's last record
    damaged = tmp_path / "damaged.mcap"
    damaged.write_bytes(bytes(data))
    got = read_flight_mcap(damaged)
    lost = sum(len(tr) for tr in whole.tracks.values()) - sum(len(tr) for tr in got.tracks.values())
    assert 0 < lost < 200
    assert any(n.startswith("1 damaged MCAP chunk(s) skipped") and "(the input clock)" in n for n in got.ingest.notes)


def test_mcap_out_makes_its_folder_and_refuses_what_it_cannot_write(tmp_path: Path, capsys):
    """`--mcap-out new/folder/flight.mcap` makes the folder, as --out does (it was a traceback: FileNotFoundError);
    a directory, or a file where its folder should be, is one line and exit 2."""
    log = str(REAL / "ardupilot" / "plane382_fragment.BIN")
    nested = tmp_path / "new" / "folder" / "flight.mcap"
    assert main(["evaluate", log, "--out", str(tmp_path / "a"), "--mcap-out", str(nested), "--quiet"]) == 0
    assert nested.stat().st_size > 0
    capsys.readouterr()
    (tmp_path / "blocker").write_text("x")
    for target, words in ((tmp_path / "new", "--mcap-out is a directory"),
                          (tmp_path / "blocker" / "flight.mcap", "a file is in the way of its folder")):
        assert main(["evaluate", log, "--out", str(tmp_path / "b"), "--mcap-out", str(target), "--quiet"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and words in err, err


def test_a_flight_mcap_cut_short_replays_from_the_poses_it_kept(tmp_path: Path):
    """A flight MCAP cut short (a kill while it was written, a full disk, a copy cut off) has no footer: it was
    refused ("cannot read MCAP"). Its whole records are now read as a cut bag's are, and the writer logs the replay's
    data (mission, raw poses, events) before the scene, so a file cut anywhere in the scene replays to the same
    report, with a note."""
    from uav_debate_eval.core.mission_file import mission_to_yaml
    from uav_debate_eval.io.csv_io import write_csv

    sim = simulate("formation", seed=0, faults=["near_miss"], duration_s=40.0)
    write_csv(sim.traj, tmp_path / "flight.csv")
    (tmp_path / "m.yaml").write_text(mission_to_yaml(sim.mission))
    mcap = tmp_path / "elsewhere" / "flight.mcap"
    main(["evaluate", str(tmp_path / "flight.csv"), "--mission", str(tmp_path / "m.yaml"), "--out",
          str(tmp_path / "a"), "--mcap-out", str(mcap), "--quiet"])
    with mcap.open("rb") as fh:
        summary = make_reader(fh).get_summary()
    topics = {c.id: c.topic for c in summary.channels.values()}
    raw_end = max(c.chunk_start_offset + c.chunk_length for c in summary.chunk_indexes
                  if any(topics[k].endswith("/pose") or topics[k] == "/mission" for k in c.message_index_offsets))
    assert raw_end < 0.6 * mcap.stat().st_size  # the scene comes after
    cut = mcap.with_name("cut.mcap")
    cut.write_bytes(mcap.read_bytes()[:raw_end + (mcap.stat().st_size - raw_end) // 2])
    assert main(["evaluate", str(mcap), "--out", str(tmp_path / "whole"), "--quiet"]) == 3
    assert main(["evaluate", str(cut), "--out", str(tmp_path / "cut"), "--quiet"]) == 3
    whole, got = (json.loads((tmp_path / d / "report.json").read_text()) for d in ("whole", "cut"))
    for key in ("verdict", "violations", "data_quality", "findings", "safety", "mission"):
        assert got[key] == whole[key], key
    assert got["violations"] and any("mission carried by the flight MCAP" in n for n in got["notes"])
    assert any(n.startswith("cut.mcap: an MCAP without its footer (a recording cut short)")
               for n in got["ingest"]["notes"])
