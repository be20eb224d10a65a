"""CSV files as exported by other tools (hapflow/datafile.py read_csv)."""
import numpy as np
import pytest

from hapflow.datafile import DataFileError, read_csv, read_signal


def test_a_delimiter_ending_every_line_is_not_a_column(tmp_path):
    # the layout of the Silverbox benchmark's CSV files (MATLAB writes it)
    path = tmp_path / "s.csv"
    path.write_text('"V1","V2",\n0.5,1.5,\n0.25,-1.0,\n0.125,2.0,\n')
    table = read_csv(path)
    assert table.names == ["V1", "V2"]
    np.testing.assert_array_equal(read_signal(path, "V2").values, [1.5, -1.0, 2.0])


def test_an_empty_header_cell_between_names_is_still_an_error(tmp_path):
    path = tmp_path / "s.csv"
    path.write_text("V1,,V2\n0.5,0,1.5\n0.25,0,-1.0\n")
    with pytest.raises(DataFileError, match=r"s.csv:1: header cell '' is not 'name'"):
        read_csv(path)


def test_the_time_column_is_read_in_its_unit_and_must_be_a_time(tmp_path):
    """A time column in minutes is minutes; in kg it is an error naming the header line (it
    was read as seconds, like every unit but ms and us)."""
    path = tmp_path / "t.csv"
    path.write_text("time [min],y\n0,1.0\n0.5,2.0\n1.0,3.0\n")
    signal = read_signal(path, "y")
    assert signal.rate == pytest.approx(1.0 / 30.0) and signal.start == 0.0
    path.write_text("time [ms],y\n10,1.0\n11,2.0\n12,3.0\n")
    assert read_signal(path, "y").rate == pytest.approx(1000.0)
    path.write_text("\ntime [kg],y\n0,1.0\n1,2.0\n")
    with pytest.raises(DataFileError, match=r"t.csv:2: the time column's unit 'kg' is not a "
                                            r"unit of time"):
        read_signal(path, "y")


def test_too_few_rows_name_the_last_line_and_the_header(tmp_path):
    path = tmp_path / "s.csv"
    path.write_text("t,y\n\n0,1\n")
    with pytest.raises(DataFileError, match=r"s.csv:3: the data end after 1 row\(s\); at least 2 "
                                            r"are needed after the header row \(line 1\)"):
        read_csv(path)
    path.write_text("")
    with pytest.raises(DataFileError, match=r"s.csv:1: the file is empty"):
        read_csv(path)
