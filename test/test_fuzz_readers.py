"""Every reader on a few hundred seeded mutants (test/fuzz_readers.py; `make fuzz` runs thousands): each is read
or rejected with one line, never a traceback or a hang; a rejected input leaves no report behind."""

import pytest
from fuzz_readers import fuzz, mutant, read_one, seeds

from uav_debate_eval.cli import main

MUTANTS = 400  # 40 per seed file, about 40 s


def test_mutants_are_read_or_rejected_in_one_line(tmp_path, capsys):
    counts, failures, rejected = fuzz(tmp_path, MUTANTS, seed=0)
    assert not failures, "\n".join(failures[:3])
    formats = {fmt for fmt, _ in counts}
    assert formats == {"csv", "mcap", "db3", "bag", "ulg", "bin", "bin_real", "tlog", "flight_mcap", "tape"}
    assert sum(counts.values()) == MUTANTS
    assert sum(v for (_, k), v in counts.items() if k == "rejected") > 20  # the mutants do bite
    capsys.readouterr()
    for fmt, path in sorted(rejected.items())[:4]:
        out = tmp_path / f"out_{fmt}"
        assert main(["evaluate", str(path), "--out", str(out), "--llm", "rules", "--quiet"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and path.name in err, err
        assert not (out / "report.json").exists()


#: Mutants of `make fuzz` runs that failed once (seed, index: their format): each now read or rejected.
FAILED_ONCE = [(8, 685, "bin"), (8, 1199, "bin_real"),  # IndexError from a damaged format table's MSG, ORGN
               (0, 527, "tape")]  # a chunk's .npy header damaged: numpy raised tokenize's TokenError


@pytest.mark.parametrize("seed,index,fmt", FAILED_ONCE)
def test_mutants_that_failed_once_are_read_or_rejected(tmp_path, seed, index, fmt):
    got, path, _ = mutant(seeds(tmp_path / "seeds"), tmp_path, seed, index, fmt)
    assert got == fmt
    assert read_one(path) in ("read", "rejected")
