"""Conversions from what data scientists hold (numpy arrays, lists, pandas Series/DataFrames,
datetime columns) to the service's Dataset and Matrix messages.

Dates become numbers on the client (the service only takes numbers), exactly as the gpsel CLI
reads ISO dates in a CSV (core/dataset.h DateUnit): decimal years, year + (time since 1 January)
/ (length of that year) in UTC, so 2024-07-02 is 2024.5; or days since 1970-01-01 UTC.
"""
import numpy as np

X_UNITS = ("years", "days")
MISSING = ("error", "drop")


def _pandas():
    try:
        import pandas
    except ImportError:  # pragma: no cover - pandas is optional
        return None
    return pandas


def is_dataframe(obj):
    pd = _pandas()
    return pd is not None and isinstance(obj, pd.DataFrame)


def dates_to_numbers(values, x_unit="years"):
    """datetime64 values (any resolution; tz-aware pandas values are taken in UTC) as decimal
    years or days since 1970-01-01 UTC, float64."""
    if x_unit not in X_UNITS:
        raise ValueError(f"x_unit: expected one of {X_UNITS}, got {x_unit!r}")
    pd = _pandas()
    if pd is not None and isinstance(values, (pd.Series, pd.Index)) and \
            getattr(values.dtype, "tz", None) is not None:
        values = values.dt.tz_convert("UTC").dt.tz_localize(None) if isinstance(values, pd.Series) \
            else values.tz_convert("UTC").tz_localize(None)
    t = np.asarray(values).astype("datetime64[ns]")
    missing = np.isnat(t)
    if x_unit == "days":
        out = (t - np.datetime64("1970-01-01T00:00:00", "ns")) / np.timedelta64(1, "D")
    else:
        year = t.astype("datetime64[Y]")
        start = year.astype("datetime64[ns]")
        end = (year + 1).astype("datetime64[ns]")
        out = year.astype(np.int64) + 1970 + (t - start) / (end - start)
    out = np.asarray(out, dtype=np.float64)
    out[missing] = np.nan
    return out


def _column_to_numbers(values, name, x_unit):
    arr = np.asarray(values)
    if np.issubdtype(arr.dtype, np.datetime64) or getattr(values, "dtype", None) is not None and \
            str(getattr(values, "dtype", "")).startswith("datetime64"):
        return dates_to_numbers(values, x_unit)
    if arr.dtype == object:
        # Numbers (None counts as missing), else Python date/datetime objects or ISO strings:
        # numbers first, so that integers are never read as nanoseconds since 1970.
        pd = _pandas()
        try:
            if pd is not None:
                return pd.to_numeric(pd.Series(arr)).to_numpy(dtype=np.float64)
            return arr.astype(np.float64)
        except (ValueError, TypeError):
            pass
        try:
            if pd is not None:
                return dates_to_numbers(pd.to_datetime(pd.Series(arr), utc=True), x_unit)
            return dates_to_numbers(arr.astype("datetime64[ns]"), x_unit)
        except (ValueError, TypeError):
            raise ValueError(f"{name}: holds values that are neither numbers nor dates") from None
    if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise ValueError(f"{name}: holds {arr.dtype} values, not numbers or dates")
    return arr.astype(np.float64)


def to_matrix(x, name="x", x_unit="years"):
    """An (n, d) float64 array from a 1-D or 2-D array-like, Series or DataFrame; datetime
    columns converted with dates_to_numbers."""
    if is_dataframe(x):
        columns = [_column_to_numbers(x[c], f"{name}[{c!r}]", x_unit) for c in x.columns]
        if not columns:
            raise ValueError(f"{name}: has no columns")
        return np.column_stack(columns)
    arr = np.asarray(x)
    if arr.ndim == 0:
        raise ValueError(f"{name}: expected an array of inputs, got a scalar")
    if arr.ndim == 1:
        return _column_to_numbers(x, name, x_unit).reshape(-1, 1)
    if arr.ndim != 2:
        raise ValueError(f"{name}: expected 1-D or 2-D inputs, got {arr.ndim}-D")
    return np.column_stack([_column_to_numbers(arr[:, j], f"{name}[:, {j}]", x_unit)
                            for j in range(arr.shape[1])]) if arr.shape[1] else \
        arr.astype(np.float64)


def to_vector(y, name="y"):
    arr = np.asarray(y)
    if arr.ndim == 2 and 1 in arr.shape:
        arr = arr.reshape(-1)
    if arr.ndim != 1:
        raise ValueError(f"{name}: expected one target per point (1-D), got shape {arr.shape}")
    return _column_to_numbers(arr, name, "years") if arr.dtype == object else \
        arr.astype(np.float64)


def select(data, x, y):
    """(x, y) from the arguments of a fit: arrays as given, or column names of `data` (a
    DataFrame). With `data` and no x, x is every column but y's; with no y, y is the last."""
    if data is None:
        if x is None or y is None:
            raise ValueError("give x and y (arrays), or data= (a DataFrame) with column names")
        return x, y
    if not is_dataframe(data):
        raise TypeError("data: expected a pandas DataFrame")
    columns = list(data.columns)
    y_name = columns[-1] if y is None else y
    if y_name not in columns:
        raise KeyError(f"y: no column {y_name!r} in data (columns: {columns})")
    if x is None:
        x_names = [c for c in columns if c != y_name]
    else:
        x_names = [x] if isinstance(x, (str, int)) and not isinstance(x, bool) else list(x)
    for name in x_names:
        if name not in columns:
            raise KeyError(f"x: no column {name!r} in data (columns: {columns})")
        if name == y_name:
            raise ValueError(f"x: {name!r} is the y column too")
    return data[x_names], data[y_name]


def _row_labels(x, rows):
    index = getattr(x, "index", None)
    labels = list(index[rows]) if index is not None else list(rows)
    shown = ", ".join(str(v) for v in labels[:10])
    return shown + (f" and {len(labels) - 10} more" if len(labels) > 10 else "")


def prepare(x, y, missing="error", x_unit="years"):
    """Float64 (n, d) inputs and (n,) targets; rows with a missing value (NaN, None, NaT) are an
    error naming them (missing="error", the default) or dropped (missing="drop")."""
    if missing not in MISSING + ("keep",):  # "keep": the server drops them (Dataset.missing)
        raise ValueError(f"missing: expected one of {MISSING}, got {missing!r}")
    xm = to_matrix(x, "x", x_unit)
    yv = to_vector(y, "y")
    if xm.shape[0] != yv.shape[0]:
        raise ValueError(f"x has {xm.shape[0]} rows but y has {yv.shape[0]} values")
    bad = np.isnan(xm).any(axis=1) | np.isnan(yv)
    if bad.any():
        rows = np.flatnonzero(bad)
        if missing == "error":
            where = x if getattr(x, "index", None) is not None else y
            raise ValueError(f"missing values in rows {_row_labels(where, rows)}; "
                             "missing='drop' skips such rows")
        if missing == "drop":
            xm, yv = xm[~bad], yv[~bad]
    return xm, yv


def fill_dataset(message, x, y, missing="error"):
    """Fills a gpsel.v1.Dataset from prepared arrays (row-major x); NaN marks a missing value,
    which the server refuses naming the points (missing="error") or leaves out ("drop")."""
    message.missing = 2 if missing == "drop" else 1  # MISSING_VALUES_DROP / _ERROR
    message.num_dims = x.shape[1]
    message.x.extend(np.ascontiguousarray(x).reshape(-1).tolist())
    message.y.extend(y.tolist())


def fill_matrix(message, x):
    message.rows, message.cols = x.shape
    message.values.extend(np.ascontiguousarray(x).reshape(-1).tolist())
