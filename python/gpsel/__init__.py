"""gpsel: which Gaussian-process kernel does your data support? A Python client of gpsel-server.

    import gpsel
    client = gpsel.Client("localhost:50051")
    scores = client.score(data=frame, x="date", y="co2", kernels=["SE", "C*SE+PER"])
    scores.to_pandas()

The messages and stubs under gpsel._proto are generated from the repository's proto/ when the
package is built (setup.py).
"""
from gpsel.client import Client
from gpsel.errors import (DeadlineExceeded, FieldViolation, GpselError, InvalidArgument,
                          NotFound, ResourceExhausted, Unauthenticated, Unavailable)
from gpsel.results import (EvidenceResult, Fit, HeldOut, Job, KernelScore, Prediction,
                           Progress, ScoreResult, SearchCandidate, SearchResult, jobs_to_pandas)
from gpsel._data import dates_to_numbers
from gpsel.model import InvalidModel, SavedModel, load_model

__all__ = [
    "Client", "GpselError", "InvalidArgument", "NotFound", "Unauthenticated", "ResourceExhausted",
    "Unavailable", "DeadlineExceeded", "FieldViolation", "Fit", "HeldOut", "KernelScore",
    "ScoreResult",
    "Progress", "SearchCandidate", "SearchResult", "Prediction", "EvidenceResult", "Job",
    "jobs_to_pandas", "dates_to_numbers", "SavedModel", "InvalidModel", "load_model",
]
__version__ = "0.1.0"
