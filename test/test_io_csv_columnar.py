"""The columnar CSV path (pyarrow) gives exactly the row-by-row reader's trajectory; irregular files fall back."""

from __future__ import annotations

import numpy as np
import pytest

from uav_debate_eval.core.errors import InputError
from uav_debate_eval.io import csv_io


def _same(a, b) -> None:
    assert a.uav_ids == b.uav_ids
    assert a.ingest.to_dict() == b.ingest.to_dict()
    for u in a.uav_ids:
        ta, tb = a.tracks[u], b.tracks[u]
        for attr in ("t", "pos", "vel", "link_ok", "gps_ok", "battery_pct", "quat"):
            va, vb = getattr(ta, attr), getattr(tb, attr)
            assert (va is None) == (vb is None), attr
            if va is not None:
                np.testing.assert_array_equal(va, vb, err_msg=f"{u} {attr}")


REGULAR = """t, uav_id ,x,y,z,vx,vy,vz,link_ok,battery_pct,comment
0.2,uav2,1.5,2,3,0,0,0,1,90,"a, quoted"
0.1,uav1,0.1,0.2,0.3,1e-3,-0,+1,1,,x
0.1,uav1,0.1,0.2,0.3,1e-3,-0,+1,1,,duplicate
0.3, uav1 ,nan,1,1,0,0,0,0,80,
0.4,,9,9,9,0,0,0,1,70,no id
,uav2,1,1,1,0,0,0,1,70,no time

0.5,uav2,1.25,2.5,3.75,Infinity,0,0,1,60,
1700000000.123456,uav3,1,1,1,0,0,0,1,50,epoch
"""


def test_regular_file_takes_the_columnar_path_and_matches_the_row_reader(tmp_path, monkeypatch):
    path = tmp_path / "f.csv"
    path.write_text(REGULAR, encoding="utf-8")
    assert csv_io._read_columnar(path, *csv_io._header(path)) is not None
    fast = csv_io.read_csv(path)
    slow = csv_io._read_rows(path, None, csv_io.Dialect())
    _same(fast, slow)
    assert fast.ingest.dropped.get("duplicate") == 1
    assert any("no uav_id" in n for n in fast.ingest.notes)


@pytest.mark.parametrize("row", ["0.6,uav1,1,2", "0.6,uav1,1,2,3,0,0,0,1,5,c,extra", "0.6,uav1,NULL,2,3,0,0,0,1,5,",
                                 "0.6,uav1,1_0,2,3,0,0,0,1,5,", "   "])
def test_irregular_rows_fall_back_and_are_reported(tmp_path, row):
    path = tmp_path / "f.csv"
    path.write_text(REGULAR + row + "\n", encoding="utf-8")
    assert csv_io._read_columnar(path, *csv_io._header(path)) is None
    _same(csv_io.read_csv(path), csv_io._read_rows(path, None, csv_io.Dialect()))


def test_unparsable_and_short_rows_are_counted(tmp_path):
    path = tmp_path / "f.csv"
    path.write_text("t,uav_id,x,y,z\n0,a,1,2,3\n0.1,a,oops,2,3\n0.2,a,1,2\n", encoding="utf-8")
    traj = csv_io.read_csv(path)
    assert "1 cell(s) were not numbers and were read as NaN" in traj.ingest.notes
    assert "1 row(s) had fewer columns than the header" in traj.ingest.notes
    assert len(traj.tracks["a"].t) == 1


@pytest.mark.parametrize(("text", "why"), [("", "empty file"), ("t,uav_id,x,y\n", "missing required column(s): z"),
                                           ("t,uav_id,x,y,z\n", "no valid samples")])
def test_bad_files_are_input_errors(tmp_path, text, why):
    path = tmp_path / "f.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=why.replace("(", r"\(").replace(")", r"\)")):
        csv_io.read_csv(path)


def test_vehicle_codes_group_as_strings_do():
    """from_columns given integer codes (the columnar reader's) builds the same trajectory as from the strings,
    also when a name only occurs in dropped rows and names are not in sorted order."""
    from uav_debate_eval.core.trajectory import SwarmTrajectory, VehicleCodes

    rng = np.random.default_rng(3)
    names = np.array(["uav10", "uav2", "ghost", "uav1", ""])
    codes = rng.integers(0, len(names), 400)
    t = np.round(rng.uniform(0, 10, 400), 1)
    pos = rng.normal(size=(400, 3))
    pos[codes == 2] = np.nan  # "ghost" has no valid row
    t[::37] = np.nan
    by_codes = SwarmTrajectory.from_columns(t, VehicleCodes(names, codes), pos)
    by_strings = SwarmTrajectory.from_columns(t, names[codes], pos)
    assert "ghost" not in by_codes.uav_ids and len(by_codes.uav_ids) == 4
    _same(by_codes, by_strings)


def _dialect(text: str, delimiter: str, decimal_comma: bool) -> str:
    """REGULAR's table as a spreadsheet writes it in another dialect (a cell with the separator in it quoted)."""
    import csv
    import io

    out = io.StringIO()
    writer = csv.writer(out, delimiter=delimiter, lineterminator="\r\n")
    for row in csv.reader(io.StringIO(text)):
        writer.writerow([c.replace(".", ",") if decimal_comma and c.strip() and c.strip()[0] in "0123456789-+"
                         else c for c in row] if row else [])
    return out.getvalue()


@pytest.mark.parametrize("delimiter,decimal_comma,bom", [(",", False, True), (";", False, False), (";", True, True),
                                                         ("\t", False, False), ("\t", True, False)])
def test_a_spreadsheets_dialect_reads_as_the_plain_file(tmp_path, delimiter, decimal_comma, bom):
    """Excel's "CSV UTF-8" starts with a byte-order mark (read as part of the first column: "missing required
    column(s): t"); a regional Excel separates cells with ';' and writes decimal commas; other tools write tabs.
    Each was refused ("missing required column(s): t, uav_id, x, y, z"); each reads as the plain file, both ways
    (columnar, and row by row when a cell is irregular), and the notes say how."""
    plain = tmp_path / "plain.csv"
    plain.write_text(REGULAR, encoding="utf-8")
    path = tmp_path / "dialect.csv"
    path.write_text(_dialect(REGULAR, delimiter, decimal_comma), encoding="utf-8-sig" if bom else "utf-8")
    header, dialect = csv_io._header(path)
    assert dialect == csv_io.Dialect(delimiter, decimal_comma) and header[0] == "t"
    assert csv_io._read_columnar(path, header, dialect) is not None
    got, expected = csv_io.read_csv(path), csv_io.read_csv(plain)
    note = dialect.note()
    assert (note is None) == (delimiter == ",") and got.ingest.notes == expected.ingest.notes + ([note] if note else [])
    got.ingest.notes = expected.ingest.notes
    _same(got, expected)
    irregular = path.read_text(encoding="utf-8-sig") + delimiter.join(["0,6" if decimal_comma else "0.6", "uav1", "x"])
    path.write_text(irregular + "\n", encoding="utf-8")
    rows = csv_io.read_csv(path)
    assert csv_io._read_columnar(path, *csv_io._header(path)) is None
    assert rows.uav_ids == expected.uav_ids and (rows.tracks["uav2"].pos == expected.tracks["uav2"].pos).all()
