#!/usr/bin/env python3
"""Independent client in another language: calls gpsel.v1.ModelSelectionService/Score with
Debian's python3-grpcio and reads the google.rpc error details of a bad request.

No generated code: message classes come from the FileDescriptorSet the build writes
(proto/gpsel_descriptor_set.binpb), exactly as a generic tool would use them
(descriptor_messages.py, shared with bench/soak.py).

  python3 python_interop.py --target 127.0.0.1:50051 --descriptor-set build/proto/gpsel_descriptor_set.binpb
Exit codes: 0 pass, 1 fail, 77 skipped (grpc or protobuf modules missing).
"""
import argparse
import math
import sys

try:
    import grpc
    from descriptor_messages import load_messages  # next to this file
except ImportError as error:  # pragma: no cover - depends on the machine
    print(f"SKIP: {error} (install python3-grpcio python3-protobuf)")
    sys.exit(77)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", required=True)
    parser.add_argument("--descriptor-set", required=True)
    args = parser.parse_args()
    cls = load_messages(args.descriptor_set)
    ScoreRequest = cls("gpsel.v1.ScoreRequest")
    ScoreResponse = cls("gpsel.v1.ScoreResponse")
    Status = cls("google.rpc.Status")
    BadRequest = cls("google.rpc.BadRequest")

    channel = grpc.insecure_channel(args.target)
    score = channel.unary_unary(
        "/gpsel.v1.ModelSelectionService/Score",
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=ScoreResponse.FromString)

    # A good request: the paper's example dataset (11 points of y = x + noise, subsampled here).
    request = ScoreRequest()
    xs = [i / 9 for i in range(10)]
    request.dataset.x.extend(xs)
    request.dataset.y.extend([x + 0.05 * math.sin(7 * x) for x in xs])
    request.kernels.append("SE")
    request.metrics.extend(["mll", "lap0"])
    request.fit.seed = 1
    response = score(request, timeout=60)
    if len(response.scores) != 1 or "lap0" not in response.scores[0].metrics:
        print("FAIL: unexpected response", response)
        return 1
    print("score ok:", response.scores[0].kernel, dict(response.scores[0].metrics))

    # A bad request: NaN in y and an unknown kernel; the details name both fields.
    bad = ScoreRequest()
    bad.dataset.x.extend([0.0, 1.0, 2.0])
    bad.dataset.y.extend([0.0, float("nan"), 1.0])
    bad.kernels.append("SQ")
    try:
        score(bad, timeout=30)
        print("FAIL: the bad request succeeded")
        return 1
    except grpc.RpcError as error:
        if error.code() != grpc.StatusCode.INVALID_ARGUMENT:
            print("FAIL: expected INVALID_ARGUMENT, got", error.code())
            return 1
        details = dict(error.trailing_metadata() or ()).get("grpc-status-details-bin")
        if details is None:
            print("FAIL: no grpc-status-details-bin trailer")
            return 1
        status = Status.FromString(details)
        fields = []
        for any_detail in status.details:
            if any_detail.type_url.endswith("/google.rpc.BadRequest"):
                bad_request = BadRequest.FromString(any_detail.value)
                fields += [v.field for v in bad_request.field_violations]
        if "dataset.y" not in fields or "kernels[0]" not in fields:
            print("FAIL: field violations", fields)
            return 1
        print("error details ok:", status.code, fields)
    print("1 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
