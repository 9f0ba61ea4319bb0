"""ArduPilot log reading throughput (issue 27): messages/s and seconds per flight-hour, three ways.

The .bin: one copter's DataFlash log of MINUTES minutes with a typical message mix (two IMUs at 100 Hz, ATT and RCOU
at 50 Hz, BARO at 20 Hz, two EKF3 lanes' XKF1 + XKF4 at 25 Hz, GPS at 5 Hz, ~425 messages/s; the reader needs
the EKF and GPS streams, about a quarter). The .tlog: a ground station's minute of 3 vehicles (the test swarm's
messages and two thirds as many again of streams the reader skips).

    unfiltered   pymavlink's DFReader loop over every message (recv_msg), keeping the ones the reader needs
    filtered     DFReader's type-filtered loop (recv_match(type=NEEDED_TYPES)): its index skips the rest
    reader       io.dataflash.read_dataflash: the same index, numpy column gathers for the bulk streams and the
                 filtered loop for the sparse ones (what `evaluate` runs)
    .tlog        mavutil's loop (decodes every packet) against the reader's scan, which walks the records by their
                 headers and decodes only the wanted message ids

    python benchmarks/bench_ardupilot.py [--minutes 10]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "test"))

from ardupilot_logs import Vehicle, write_tlog  # noqa: E402

from uav_debate_eval.io import tlog as tlog_reader  # noqa: E402
from uav_debate_eval.io.dataflash import read_dataflash  # noqa: E402
from uav_debate_eval.io.dataflash_columns import NEEDED_TYPES  # noqa: E402
from uav_debate_eval.io.dataflash_open import open_dataflash  # noqa: E402
from uav_debate_eval.io.tlog import read_tlog  # noqa: E402
from uav_debate_eval.sim.dataflash import DataFlashWriter  # noqa: E402

TARGET_S_PER_FLIGHT_HOUR = 5.0  # the reader, one vehicle's DataFlash log
FILLER = {"IMU": (90, "QBffffff", "TimeUS,I,GyrX,GyrY,GyrZ,AccX,AccY,AccZ"),
          "ATT": (91, "Qffffff", "TimeUS,DesRoll,Roll,DesPitch,Pitch,DesYaw,Yaw"),
          "BARO": (92, "QBfff", "TimeUS,I,Alt,Press,Temp"),
          "RCOU": (93, "QHHHH", "TimeUS,C1,C2,C3,C4")}


def write_log(path: Path, minutes: float) -> float:
    """The benchmark's DataFlash log; returns its duration (s)."""
    w = DataFlashWriter(path, FILLER)
    w.write("MSG", 0, "ArduCopter V4.5.7 (2a3dc4b7)")
    w.write("PARM", 0, "SYSID_THISMAV", 1, 1)
    w.write("ORGN", 0, 0, -35.363261, 149.165230, 584.0)
    dur = minutes * 60.0
    for k in range(int(dur * 100)):
        t = k / 100.0
        us = int(t * 1e6) + 10_000_000
        for inst in (0, 1):
            w.write("IMU", us, inst, 0.01, 0.02, 0.03, 0.1, 0.2, -9.8)
        if k % 2 == 0:
            w.write("ATT", us, 1.0, 1.1, 2.0, 2.1, 90.0, 90.5)
            w.write("RCOU", us, 1500, 1500, 1500, 1500)
        if k % 4 == 0:
            for core in (0, 1):
                w.write("XKF1", us, core, 0, 0, 0, 1.0, 0.0, 0.0, 0.0, t, 0.0, -10.0, 0, 0, 0, 0)
                w.write("XKF4", us, core, 0.1, 0.1, 0.1, 0.1, 0.0, 0.0, 0, 0, 0, 0, 0x3F, 0, 0)
        if k % 5 == 0:
            w.write("BARO", us, 0, 10.0, 1000.0, 20.0)
        if k % 20 == 0:
            w.write("GPS", us, 0, 3, 200_000_000 + k * 10, 2400, 12, 0.8, -35.36, 149.16, 594.0, 1.0, 0, 0, 0, 1)
    w.close()
    return dur


def write_telemetry(path: Path) -> Path:
    """The test swarm's .tlog plus the streams a ground station also records (attitude, HUD, RC, servos, IMU)."""
    from pymavlink.dialects.v20 import ardupilotmega as mavlink

    write_tlog([Vehicle(k + 1, 100.0 + k, 10.0 * k) for k in range(3)], path)
    t0 = 1767684782.0
    with open(path, "ab") as f:
        for sysid in (1, 2, 3):
            mav = mavlink.MAVLink(None, srcSystem=sysid, srcComponent=1)
            for k in range(600):
                t = t0 + k / 10.0
                msgs = [mavlink.MAVLink_attitude_message(k * 100, 0.01, 0.02, 1.5, 0.0, 0.0, 0.0)]
                if k % 5 == 0:
                    msgs += [mavlink.MAVLink_vfr_hud_message(3.0, 3.0, 90, 50, 10.0, 0.0),
                             mavlink.MAVLink_rc_channels_message(k * 100, 8, *[1500] * 18, 255),
                             mavlink.MAVLink_servo_output_raw_message(k * 100, 0, *[1500] * 8),
                             mavlink.MAVLink_raw_imu_message(k * 100_000, 0, 0, -1000, 1, 2, 3, 200, 10, -400)]
                if k % 10 == 0:
                    msgs += [mavlink.MAVLink_vibration_message(k * 100_000, 1.0, 1.0, 1.0, 0, 0, 0)]
                for m in msgs:
                    f.write(int(t * 1e6).to_bytes(8, "big") + m.pack(mav))
    return path


def unfiltered(path: Path) -> int:
    """Every message through DFReader; the needed ones kept as rows (what a naive reader does)."""
    reader = open_dataflash(path)
    need, rows, n = set(NEEDED_TYPES), [], 0
    with contextlib.redirect_stderr(io.StringIO()):
        while (m := reader.recv_msg()) is not None:
            n += 1
            if m.get_type() in need:
                rows.append(m.to_dict())
    reader.close()
    return n


def filtered(path: Path) -> int:
    """DFReader's own type filter: its index jumps from one needed message to the next."""
    reader = open_dataflash(path)
    rows = []
    with contextlib.redirect_stderr(io.StringIO()):
        while (m := reader.recv_match(type=NEEDED_TYPES, strict=True)) is not None:
            rows.append(m.to_dict())
    reader.close()
    return len(rows)


def timed(fn, *args) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t0, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=10.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "copter.bin"
        dur = write_log(path, args.minutes)
        reader = open_dataflash(path)
        total = int(reader._count)
        reader.close()
        print(f"log: {args.minutes:g} min, {total:,} messages, {path.stat().st_size / 1e6:.1f} MB")
        runs = {"unfiltered DFReader loop": timed(unfiltered, path)[0],
                "DFReader type filter": timed(filtered, path)[0],
                "reader (index + numpy columns)": min(timed(read_dataflash, path, "copter")[0] for _ in range(3))}
        for name, secs in runs.items():
            print(f"{name:32s} {total / secs:12,.0f} messages/s {secs * 3600 / dur:8.2f} s per flight-hour")
        per_hour = runs["reader (index + numpy columns)"] * 3600 / dur
        print(f"reader: {per_hour:.2f} s per flight-hour (target <= {TARGET_S_PER_FLIGHT_HOUR:g}); "
              f"{runs['unfiltered DFReader loop'] / runs['reader (index + numpy columns)']:.0f}x the unfiltered loop")
        tlog = write_telemetry(Path(tmp) / "swarm.tlog")
        n = read_tlog(tlog)[0].messages
        print(f"tlog: 3 vehicles, 60 s, {n:,} messages (two in five are streams the reader skips)")
        t_all = timed(tlog_reader._robust, tlog)[0]
        t_filtered = min(timed(read_tlog, tlog)[0] for _ in range(3))
        for name, secs in (("mavutil loop (every message)", t_all), ("reader (type-filtered scan)", t_filtered)):
            print(f"{name:32s} {n / secs:12,.0f} messages/s {secs * 60:8.2f} s per flight-hour of 3 vehicles")
        ok = per_hour <= TARGET_S_PER_FLIGHT_HOUR
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
