"""Errors of the gpsel client: one exception per gRPC status the service documents
(proto/gpsel/v1/model_selection.proto), carrying the google.rpc details it sends."""
from dataclasses import dataclass
from typing import List, Optional

import grpc


@dataclass(frozen=True)
class FieldViolation:
    """One bad field of a request: field is the request's path ("dataset.y", "kernels[0]")."""
    field: str
    description: str


class GpselError(Exception):
    """A failed call. code is the grpc.StatusCode, message the server's text, field_violations
    the google.rpc.BadRequest entries and reason the google.rpc.ErrorInfo reason, if any."""

    def __init__(self, code, message, field_violations=(), reason: Optional[str] = None):
        self.code = code
        self.message = message
        self.field_violations: List[FieldViolation] = list(field_violations)
        self.reason = reason
        text = f"{code.name if hasattr(code, 'name') else code}: {message}"
        if self.field_violations:
            text += " [" + "; ".join(f"{v.field}: {v.description}"
                                     for v in self.field_violations) + "]"
        super().__init__(text)


class InvalidArgument(GpselError, ValueError):
    """INVALID_ARGUMENT: see field_violations for the fields at fault."""


class NotFound(GpselError, LookupError):
    """NOT_FOUND: e.g. an unknown job."""


class Unauthenticated(GpselError, PermissionError):
    """UNAUTHENTICATED: missing or wrong token."""


class ResourceExhausted(GpselError):
    """RESOURCE_EXHAUSTED: the queue is full (reason QUEUE_FULL or JOB_QUEUE_FULL): retry later."""


class Unavailable(GpselError, ConnectionError):
    """UNAVAILABLE: the server is unreachable or draining: retry, elsewhere if possible."""


class DeadlineExceeded(GpselError, TimeoutError):
    """DEADLINE_EXCEEDED: the call took longer than its timeout."""


_BY_CODE = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
}


def from_rpc_error(error: grpc.RpcError) -> GpselError:
    """The GpselError of a grpc.RpcError, with the details of its grpc-status-details-bin
    trailer decoded."""
    from gpsel._proto.google.rpc import error_details_pb2, status_pb2

    violations, reason = [], None
    trailer = dict(error.trailing_metadata() or ()).get("grpc-status-details-bin")
    if trailer:
        status = status_pb2.Status.FromString(trailer)
        for detail in status.details:
            if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
                bad = error_details_pb2.BadRequest()
                detail.Unpack(bad)
                violations += [FieldViolation(v.field, v.description)
                               for v in bad.field_violations]
            elif detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                info = error_details_pb2.ErrorInfo()
                detail.Unpack(info)
                reason = info.reason
    cls = _BY_CODE.get(error.code(), GpselError)
    return cls(error.code(), error.details() or "", violations, reason)


def from_status(status) -> GpselError:
    """The GpselError of a failed job's google.rpc.Status."""
    from gpsel._proto.google.rpc import error_details_pb2

    code = next((c for c in grpc.StatusCode if c.value[0] == status.code), grpc.StatusCode.UNKNOWN)
    violations = []
    for detail in status.details:
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            violations += [FieldViolation(v.field, v.description) for v in bad.field_violations]
    return _BY_CODE.get(code, GpselError)(code, status.message, violations)
