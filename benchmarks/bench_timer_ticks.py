"""How regularly a 20 Hz timer fires beside a busy subscription, per rclpy executor and clock (issue 16).

Why: the safety verifier's full check runs on such a timer. On rclpy's EventsExecutor (Jazzy, rclpy 7.1) a
ROS-time timer under use_sim_time was dispatched several times at the same instant and then not at all for
over a second of sim time while the executor's thread was about half busy with messages; the live test of a
vehicle silent for 2 s (stale after 1 s) then missed the veto about once in four full test runs. The verifier
now also runs an overdue check from the pose callback (live.verifier.LiveVerifier.on_pose); this benchmark shows the
executor behaviour itself, so the workaround can be reviewed when rclpy changes.

One process: a node publishes /clock (sim time = 1 s + wall time since start) at 20 Hz and `--rate` messages/s
on a topic; the probe node (use_sim_time on or off) has a 20 Hz timer and a subscription whose callback keeps
the thread busy `--busy-ms` per message. Printed per executor and clock: timer ticks against the expected
number, the largest gap between ticks in the timer's own clock, and ticks at the same instant as the previous.
`--load K` runs K CPU-bound processes alongside (default 2, one per core here: a full test run or a flight
computer's other work): the irregularity needs a thread that is both busy and short of CPU. A timer is regular
with >= 95 % of its ticks and no gap over 0.25 s (5 periods). Measured here (2 cores, defaults): EventsExecutor
225/400 ticks under sim time (largest gap 0.95 s, 65 ticks at the same instant) and 201/400 under wall time
(0.63 s); SingleThreadedExecutor 365/400 (0.20 s) and 401/400 (0.06 s). While other test runs shared the machine
the EventsExecutor fell to 38/400 under sim time (2.3 s). On an idle machine (--load 0) all four were regular.

    python benchmarks/bench_timer_ticks.py [--seconds 20] [--rate 1000] [--busy-ms 0.8] [--load 2]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import threading
import time

from bench_veto_latency import burn

PERIOD_S = 0.05  # the timer: one tick per /clock step (a sim-time timer cannot tick faster than its clock)
CLOCK_HZ = 20.0
REGULAR_TICKS = 0.95
REGULAR_GAP_S = 5 * PERIOD_S


def run(executor_kind: str, sim_time: bool, seconds: float, rate: float, busy_ms: float) -> tuple[int, float, int]:
    """(ticks, largest gap in the timer's clock, ticks at the same instant as the previous one)."""
    import rclpy
    from builtin_interfaces.msg import Time
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from rosgraph_msgs.msg import Clock
    from std_msgs.msg import Float64

    context = rclpy.Context()
    rclpy.init(context=context, domain_id=200 + os.getpid() % 30)
    qos = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE)
    source = rclpy.create_node("tick_source", context=context)
    clock_pub = source.create_publisher(Clock, "/clock", 10)
    msg_pub = source.create_publisher(Float64, "load", qos)
    probe = rclpy.create_node("tick_probe", context=context,
                              parameter_overrides=[Parameter("use_sim_time", value=sim_time)])
    ticks: list[float] = []
    probe.create_timer(PERIOD_S, lambda: ticks.append(probe.get_clock().now().nanoseconds * 1e-9))

    def busy(_msg) -> None:
        end = time.perf_counter() + busy_ms / 1000.0
        while time.perf_counter() < end:
            pass

    probe.create_subscription(Float64, "load", busy, qos)
    if executor_kind == "events":
        from rclpy.experimental import EventsExecutor
        executor = EventsExecutor(context=context)
    else:
        executor = SingleThreadedExecutor(context=context)
    executor.add_node(probe)
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            executor.spin_once(timeout_sec=0.1)

    spinner = threading.Thread(target=spin, daemon=True)
    spinner.start()
    start, k = time.monotonic(), 0
    per_tick = max(1, round(rate / CLOCK_HZ))
    while time.monotonic() - start < seconds:
        t = 1.0 + k / CLOCK_HZ
        clock_pub.publish(Clock(clock=Time(sec=int(t), nanosec=round((t % 1.0) * 1e9) % 1_000_000_000)))
        for _ in range(per_tick):
            msg_pub.publish(Float64(data=t))
        k += 1
        time.sleep(max(0.0, start + k / CLOCK_HZ - time.monotonic()))
    stop.set()
    spinner.join(timeout=5.0)
    executor.shutdown(timeout_sec=1.0)
    rclpy.shutdown(context=context)
    gaps = [b - a for a, b in zip(ticks, ticks[1:], strict=False)]
    return len(ticks), max(gaps, default=float("inf")), sum(1 for g in gaps if g == 0.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--rate", type=float, default=1000.0, help="messages per second on the busy subscription")
    ap.add_argument("--busy-ms", type=float, default=0.8, help="thread time each message takes, ms")
    ap.add_argument("--load", type=int, default=2, help="CPU-bound processes to run alongside")
    args = ap.parse_args()
    from uav_debate_eval.nodes.executors import events_executor_available

    expected = round(args.seconds / PERIOD_S)
    print(f"20 Hz timer beside {args.rate:g} msg/s x {args.busy_ms:g} ms, {args.seconds:g} s; "
          f"regular: >= {REGULAR_TICKS:.0%} of {expected} ticks, largest gap <= {REGULAR_GAP_S:g} s")
    kinds = ["events", "single"] if events_executor_available() else ["single"]
    runs = len(kinds) * 2
    burners = [multiprocessing.get_context("fork").Process(target=burn, args=(runs * (args.seconds + 2.0),),
                                                           daemon=True) for _ in range(args.load)]
    for burner in burners:
        burner.start()
    print(f"{args.load} CPU-bound process(es) alongside")
    for kind in kinds:
        for sim_time in (True, False):
            n, gap, same = run(kind, sim_time, args.seconds, args.rate, args.busy_ms)
            regular = n >= REGULAR_TICKS * expected and gap <= REGULAR_GAP_S
            print(f"  {kind:6s} {'sim time' if sim_time else 'wall time':9s}: {n:4d}/{expected} ticks "
                  f"({n / expected:.0%}), largest gap {gap:.2f} s, {same} at the same instant  "
                  f"{'regular' if regular else 'IRREGULAR'}")
    for burner in burners:
        burner.terminate()


if __name__ == "__main__":
    main()
