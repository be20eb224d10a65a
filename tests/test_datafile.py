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
