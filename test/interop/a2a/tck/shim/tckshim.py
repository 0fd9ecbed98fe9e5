"""A pytest plugin that lets the A2A TCK's gRPC client run on Debian 12's
python3-protobuf (3.21) and python3-grpcio (1.51), older than the ones its
generated stubs were made with (PyPI is out of reach here). It changes
nothing of the TCK: it adds what the stubs import and the old runtime
lacks, before any test runs.

  - google.protobuf.runtime_version: the stubs' version check (a no-op);
  - google/api/{annotations,client,field_behavior}.proto: empty files in
    the descriptor pool (a2a.proto imports them only for options, which
    the client does not read) and their _pb2 modules;
  - the _registered_method argument of grpc's channel methods (1.63+),
    dropped.
"""
import enum
import sys
import types


def _runtime_version():
    try:
        import google.protobuf.runtime_version  # noqa: F401
        return
    except ImportError:
        pass
    mod = types.ModuleType("google.protobuf.runtime_version")

    class Domain(enum.Enum):
        GOOGLE_INTERNAL = 1
        PUBLIC = 2

    mod.Domain = Domain
    mod.ValidateProtobufRuntimeVersion = lambda *a, **k: None
    sys.modules["google.protobuf.runtime_version"] = mod
    import google.protobuf
    google.protobuf.runtime_version = mod


def _google_api():
    try:
        import google.api.annotations_pb2  # noqa: F401
        return
    except ImportError:
        pass
    from google.protobuf import descriptor_pb2, descriptor_pool
    pool = descriptor_pool.Default()
    pkg = types.ModuleType("google.api")
    pkg.__path__ = []
    sys.modules["google.api"] = pkg
    for name in ("annotations", "client", "field_behavior", "http"):
        fd = descriptor_pb2.FileDescriptorProto(name=f"google/api/{name}.proto", package="google.api", syntax="proto3")
        try:
            pool.Add(fd)
        except TypeError:
            pass
        mod = types.ModuleType(f"google.api.{name}_pb2")
        mod.DESCRIPTOR = pool.FindFileByName(f"google/api/{name}.proto")
        sys.modules[f"google.api.{name}_pb2"] = mod
        setattr(pkg, f"{name}_pb2", mod)


def _grpc_registered_method():
    try:
        import grpc
        from grpc import _channel
    except ImportError:
        return
    for cls in (_channel.Channel,):
        for meth in ("unary_unary", "unary_stream", "stream_unary", "stream_stream"):
            orig = getattr(cls, meth, None)
            if orig is None:
                continue

            def wrapped(self, *a, _orig=orig, **k):
                k.pop("_registered_method", None)
                return _orig(self, *a, **k)

            setattr(cls, meth, wrapped)
    del grpc


_runtime_version()
_google_api()
_grpc_registered_method()
