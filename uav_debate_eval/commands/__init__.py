"""Sub-commands of the `uav-debate-eval` CLI; each module exposes `register(subparsers)`."""
