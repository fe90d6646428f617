"""Unit tests of the gpsel package's conversions (no server): dates, numpy/pandas inputs,
missing values, column choice, and the dataclasses' to_pandas(). Run by tests/python/run.sh
with the installed package."""
import datetime
import unittest

import numpy as np
import pandas as pd

import gpsel
from gpsel import _data
from gpsel._proto.gpsel.v1 import job_pb2, types_pb2


class DatesTest(unittest.TestCase):
    # Hand-counted: 2024 is a leap year and 2024-07-02 is day 183 of 366; 1970..1999 hold 7 leap
    # days, so 2000-01-01 is day 10957 since 1970-01-01. The same values as the CLI's
    # (tests/core/dataset_test.cc IsoDatesAsDecimalYearsAndDays).
    def test_decimal_years_and_days(self):
        t = np.array(["2024-07-02", "1970-01-02", "2000-01-01T12:00", "1900-03-01"],
                     dtype="datetime64[ns]")
        np.testing.assert_allclose(gpsel.dates_to_numbers(t),
                                   [2024.5, 1970 + 1 / 365, 2000 + 0.5 / 366, 1900 + 59 / 365],
                                   rtol=0, atol=1e-12)
        np.testing.assert_allclose(gpsel.dates_to_numbers(t, "days"),
                                   [19906.0, 1.0, 10957.5, -25508.0], rtol=0, atol=1e-9)
        with self.assertRaises(ValueError):
            gpsel.dates_to_numbers(t, "hours")

    def test_time_zones_are_taken_in_utc_and_nat_is_missing(self):
        s = pd.Series(pd.to_datetime(["2000-01-01T14:00:00+02:00", "2000-01-01T06:00:00-06:00"],
                                     utc=True))
        np.testing.assert_allclose(gpsel.dates_to_numbers(s, "days"), [10957.5, 10957.5])
        out = gpsel.dates_to_numbers(pd.Series(pd.to_datetime(["2000-01-01", None])))
        self.assertEqual(out[0], 2000.0)
        self.assertTrue(np.isnan(out[1]))

    def test_python_dates_and_iso_strings(self):
        x = _data.to_matrix([datetime.date(2024, 7, 2), datetime.date(2000, 1, 1)])
        np.testing.assert_allclose(x[:, 0], [2024.5, 2000.0])
        x = _data.to_matrix(np.array(["2024-07-02", "2000-01-01"], dtype=object))
        np.testing.assert_allclose(x[:, 0], [2024.5, 2000.0])
        # Integers and None in an object array are numbers (and a missing one), never dates.
        x = _data.to_matrix(np.array([1, None, 3], dtype=object))
        np.testing.assert_array_equal(x[[0, 2], 0], [1.0, 3.0])
        self.assertTrue(np.isnan(x[1, 0]))
        with self.assertRaisesRegex(ValueError, "neither numbers nor dates"):
            _data.to_matrix(np.array(["Aswan", "Cairo"], dtype=object))


class InputsTest(unittest.TestCase):
    def setUp(self):
        self.frame = pd.DataFrame({
            "date": pd.to_datetime(["1871-01-01", "1872-01-01", "1873-01-01", "1874-01-01"]),
            "depth": [1.0, 2.0, 3.0, 4.0],
            "flow": [1120.0, 1160.0, np.nan, 1210.0],
        }, index=["a", "b", "c", "d"])

    def test_shapes(self):
        self.assertEqual(_data.to_matrix(np.arange(5.0)).shape, (5, 1))
        self.assertEqual(_data.to_matrix(np.ones((5, 3))).shape, (5, 3))
        self.assertEqual(_data.to_vector(np.ones((5, 1))).shape, (5,))
        with self.assertRaises(ValueError):
            _data.to_vector(np.ones((5, 2)))
        with self.assertRaises(ValueError):
            _data.to_matrix(np.ones((2, 2, 2)))
        with self.assertRaisesRegex(ValueError, "4 rows but y has 3"):
            _data.prepare(np.arange(4.0), np.arange(3.0))

    def test_column_names_of_a_dataframe(self):
        x, y = _data.select(self.frame, "date", "flow")
        xm, yv = _data.prepare(x, y, missing="drop")
        np.testing.assert_array_equal(xm[:, 0], [1871.0, 1872.0, 1874.0])
        np.testing.assert_array_equal(yv, [1120.0, 1160.0, 1210.0])
        # No x: every column but y; no y: the last column.
        x, y = _data.select(self.frame, None, None)
        self.assertEqual(list(x.columns), ["date", "depth"])
        self.assertEqual(y.name, "flow")
        with self.assertRaisesRegex(KeyError, "no column 'co2'"):
            _data.select(self.frame, "date", "co2")
        with self.assertRaisesRegex(ValueError, "is the y column too"):
            _data.select(self.frame, ["date", "flow"], "flow")
        with self.assertRaises(ValueError):
            _data.select(None, np.arange(3.0), None)

    def test_missing_values_name_the_rows_or_are_dropped(self):
        x, y = _data.select(self.frame, ["date", "depth"], "flow")
        with self.assertRaisesRegex(ValueError, r"missing values in rows c;.*missing='drop'"):
            _data.prepare(x, y)
        xm, yv = _data.prepare(x, y, missing="drop")
        self.assertEqual(xm.shape, (3, 2))
        with self.assertRaisesRegex(ValueError, "rows 1"):
            _data.prepare(np.array([0.0, np.nan, 2.0]), np.zeros(3))
        with self.assertRaises(ValueError):
            _data.prepare(np.arange(3.0), np.zeros(3), missing="fill")

    def test_dataset_message_is_row_major(self):
        message = types_pb2.Dataset()
        _data.fill_dataset(message, np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([5.0, 6.0]))
        self.assertEqual(list(message.x), [1.0, 2.0, 3.0, 4.0])
        self.assertEqual(message.num_dims, 2)
        self.assertEqual(list(message.y), [5.0, 6.0])


class ResultsTest(unittest.TestCase):
    def test_score_result_to_pandas_and_best(self):
        a, b = types_pb2.KernelScore(kernel="SE"), types_pb2.KernelScore(kernel="C*SE")
        a.metrics["lap0"], b.metrics["lap0"] = -10.0, -8.0
        a.num_hyperparameters, b.num_hyperparameters = 2, 3
        result = gpsel.ScoreResult([gpsel.KernelScore.from_proto(a),
                                    gpsel.KernelScore.from_proto(b)])
        self.assertEqual(result.best("lap0").kernel, "C*SE")
        frame = result.to_pandas()
        self.assertEqual(list(frame.index), ["SE", "C*SE"])
        self.assertEqual(frame.loc["C*SE", "lap0"], -8.0)
        self.assertEqual(frame.loc["SE", "num_hyperparameters"], 2)
        with self.assertRaises(KeyError):
            result.best("bic")

    def test_prediction_std_and_frame(self):
        p = gpsel.Prediction(np.array([[0.0], [1.0]]), np.array([1.0, 2.0]),
                             np.array([0.25, 1.0]), np.array([0.75, 0.0]), "SE", {}, None)
        np.testing.assert_allclose(p.std, [0.5, 1.0])
        np.testing.assert_allclose(p.std_with_noise, [1.0, 1.0])
        self.assertEqual(list(p.to_pandas().columns), ["x", "mean", "sd", "sd_with_noise"])


    def test_sparse_score_fields_and_the_approx_arguments(self):
        m = types_pb2.KernelScore(kernel="SE", method="sparse", inducing_points=64,
                                  approx_note="auto: sparse (exact estimated 2:00 > 60 s)")
        m.metrics["bic"] = -10.5
        m.intervals["bic"].lower, m.intervals["bic"].upper = -10.5, -9.25
        score = gpsel.KernelScore.from_proto(m)
        self.assertEqual(score.method, "sparse")
        self.assertEqual(score.inducing_points, 64)
        self.assertEqual(score.intervals, {"bic": (-10.5, -9.25)})
        self.assertIn("auto: sparse", score.approx_note)
        self.assertEqual(gpsel.KernelScore.from_proto(types_pb2.KernelScore()).method, "exact")
        # Per-column --scale-x auto (SE[*]): each column's factor; empty with one factor.
        per_column = types_pb2.KernelScore(kernel="SE[0]*SE[1]", x_scale=1.0, x_scales=[2.5, 0.1])
        self.assertEqual(gpsel.KernelScore.from_proto(per_column).x_scales, [2.5, 0.1])
        self.assertEqual(gpsel.KernelScore.from_proto(m).x_scales, [])
        # A sparse search re-scored exactly: best_sparse is the score it was ranked by.
        searched = job_pb2.SearchResult(best_kernel="SE", best=types_pb2.KernelScore(kernel="SE"))
        self.assertIsNone(gpsel.SearchResult.from_proto(searched).best_sparse)
        searched.best_sparse.CopyFrom(m)
        self.assertEqual(gpsel.SearchResult.from_proto(searched).best_sparse.intervals,
                         {"bic": (-10.5, -9.25)})
        fit = types_pb2.FitOptions()
        gpsel.Client._approx(fit, "auto", 128)
        self.assertEqual(fit.approx, types_pb2.APPROXIMATION_AUTO)
        self.assertEqual(fit.inducing_points, 128)
        with self.assertRaisesRegex(ValueError, "approx"):
            gpsel.Client._approx(fit, "fitc", None)
        with self.assertRaisesRegex(ValueError, "inducing_points"):
            gpsel.Client._approx(fit, None, -1)


class OperatorsTest(unittest.TestCase):
    # "CP[1]" becomes SearchRequest.change_columns, as the CLI's --operators +,*,CP[1]
    # (core ParseSearchOperators: CP and CW share one list of columns).
    def test_pinned_change_moves_become_change_columns(self):
        from gpsel.client import _split_operators
        self.assertEqual(_split_operators(["+", "*", "CP[1]"]), (["+", "*", "CP"], [1]))
        self.assertEqual(_split_operators("+,*,cw[2],CP[2],CP[0],CW[0]"),
                         (["+", "*", "CW", "CP"], [0, 2]))
        self.assertEqual(_split_operators("+,*,CP,CW"), (["+", "*", "CP", "CW"], []))
        self.assertEqual(_split_operators(None), ([], []))
        # Unknown entries pass through for the server to name (operators[i]).
        self.assertEqual(_split_operators("+,*,XY[1]"), (["+", "*", "XY[1]"], []))
        for bad in ["+,*,CP,CP[1]", "+,*,CP[1],CP[1]", "+,*,CP[0],CW[1]", "+,*,CP[0],CW"]:
            with self.assertRaises(ValueError, msg=bad):
                _split_operators(bad)


if __name__ == "__main__":
    unittest.main()
