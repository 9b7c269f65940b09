"""Sends one OTLP ExportProfilesServiceRequest to Stackhouse's gRPC port with grpcio over
TLS, trusting only the given root certificate: an independent gRPC client for the TLS
tests. The request is sent as the raw protobuf bytes of a file, so no generated code is
needed. Prints the outcome as JSON.

Usage: otlp_grpc_export.py HOST:PORT ROOT_CA.pem REQUEST.pb [KEY=VALUE metadata...]
"""

import json
import sys

import grpc

METHOD = "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"


def main():
    target, ca_path, request_path = sys.argv[1:4]
    metadata = [tuple(item.split("=", 1)) for item in sys.argv[4:]]
    with open(ca_path, "rb") as f:
        credentials = grpc.ssl_channel_credentials(root_certificates=f.read())
    with open(request_path, "rb") as f:
        request = f.read()
    with grpc.secure_channel(target, credentials) as channel:
        # No serializers: bytes go out as they are and come back as bytes.
        export = channel.unary_unary(METHOD)
        try:
            response = export(request, metadata=metadata, timeout=60)
            print(json.dumps({"ok": True, "response_bytes": len(response)}))
        except grpc.RpcError as error:
            print(json.dumps({"ok": False, "code": error.code().name, "details": error.details()}))


if __name__ == "__main__":
    main()
