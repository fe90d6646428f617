"""Saved models: what `gpsel score|search --save-model FILE` writes (the gpsel.v1.SavedModel
message in the protobuf JSON mapping, core/saved_model.h) read into Python, to predict from it
without refitting: `client.predict(X_new=..., model=gpsel.load_model("model.json"), x=x, y=y)`.
The training data must be given again (the server checks it against the model's fingerprint).
"""
import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, Optional

from google.protobuf import json_format

from gpsel._proto.gpsel.v1 import types_pb2

FORMAT = "gpsel.v1.SavedModel"


class InvalidModel(ValueError):
    """A file or object that is not a usable gpsel saved model; the message names the problem."""


@dataclass
class SavedModel:
    """A kernel with the natural hyperparameter values of its MLL and MAP fits (None when the
    score did not make that fit), its standardisation and the fingerprint of its training data."""
    kernel: str
    mll_values: Optional[Dict[str, float]]
    map_values: Optional[Dict[str, float]]
    standardized: bool
    x_scale: float
    num_points: int
    num_dims: int
    data_hash: str
    gpsel_version: str
    metrics: Dict[str, float]
    proto: Any = field(repr=False, compare=False, default=None)

    @classmethod
    def from_proto(cls, m):
        if m.format != FORMAT:
            raise InvalidModel(f"format: is {m.format!r}, not {FORMAT!r}: not a gpsel saved model")
        if not m.kernel:
            raise InvalidModel("kernel: is empty")
        if not m.HasField("mll_fit") and not m.HasField("map_fit"):
            raise InvalidModel("the model holds neither an MLL nor a MAP fit")
        if m.num_points <= 0 or m.num_dims <= 0 or not m.data_hash:
            raise InvalidModel("the model has no fingerprint of its training data")
        return cls(m.kernel,
                   dict(m.mll_fit.values) if m.HasField("mll_fit") else None,
                   dict(m.map_fit.values) if m.HasField("map_fit") else None,
                   m.standardized, m.x_scale, m.num_points, m.num_dims, m.data_hash,
                   m.gpsel_version, dict(m.metrics), m)

    def to_proto(self):
        return self.proto


def load_model(path) -> SavedModel:
    """The saved model in `path` (a file written by --save-model). InvalidModel naming the problem
    when the file is not JSON, is JSON of something else, or is malformed."""
    with open(os.fspath(path), "r", encoding="utf-8") as f:
        text = f.read()
    try:
        json.loads(text)
    except ValueError as e:
        raise InvalidModel(f"{path}: not a gpsel saved model (not JSON: {e})") from None
    message = types_pb2.SavedModel()
    try:
        json_format.Parse(text, message)
    except json_format.ParseError as e:
        raise InvalidModel(f"{path}: not a gpsel saved model ({e})") from None
    try:
        return SavedModel.from_proto(message)
    except InvalidModel as e:
        raise InvalidModel(f"{path}: {e}") from None
