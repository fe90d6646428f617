"""Message classes of the gRPC contract without generated code, for the Python tools that talk to
gpsel-server (tests/server/service/python_interop.py, bench/soak.py): they are built from the
FileDescriptorSet the build writes (proto/gpsel_descriptor_set.binpb), exactly as a generic gRPC
tool would use it, so the Python side needs only Debian's python3-grpcio and python3-protobuf.
"""
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory


def load_messages(path):
    """Returns cls(full_name) -> the message class, e.g. cls("gpsel.v1.ScoreRequest")."""
    files = descriptor_pb2.FileDescriptorSet()
    with open(path, "rb") as f:
        files.ParseFromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for file_proto in files.file:
        pool.Add(file_proto)
    factory = message_factory.MessageFactory(pool)
    return lambda name: factory.GetPrototype(pool.FindMessageTypeByName(name))
