"""The offline evaluation of a flight (pipeline) and its parallel runners: the segments' evidence and the figures
on the second core (segment_work, forked), batches on a Dask cluster (fleet)."""
