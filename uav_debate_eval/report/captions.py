"""The report figures' names and captions, apart from the drawing code: the Markdown and HTML reports name the
figures without loading matplotlib (the figures are drawn in a child process, report/figure_job.py)."""

#: Figure name -> caption, in the order the reports show them.
CAPTIONS = {
    "trajectory_xy": "Top-down trajectories (ENU), start o, end s; violations x (red), events ^",
    "trajectory_3d": "3-D trajectories (colours as in the top-down view); violations x (red), events ^",
    "separation": "Minimum pairwise separation with the limit, the warning distance and veto intervals (shaded)",
    "altitude_speed": "Altitude and speed per vehicle",
    "rules": "Mission rules that failed or came near failing: robustness over time (min over vehicles / pairs), "
             "failing intervals shaded",
    "scores": "Category scores (0..1)",
    "debate_rounds": "Debate: consensus and response quality per round",
}
