"""The names the `compare` command offers (its --help lists them without importing the debate machinery).

The built-in suite: each of the simulator's seven fault kinds once, plus clean flights.
"""

#: The built-in scenario suite of Table II ("scenario" or "scenario:fault,fault").
DEFAULT_SUITE = ("formation", "surveillance", "tracking", "swap", "formation:near_miss", "formation:altitude_drop",
                 "surveillance:geofence_exit", "formation:telemetry_dropout", "tracking:overspeed",
                 "surveillance:sharp_turn", "formation:link_loss")
#: The debate and the baselines (debate.baselines.METHODS, checked by a test).
ALL_METHODS = ("debate", "single_metric", "fixed_weight", "single_agent")
