"""Encodes OTLP profiles in the opentelemetry-proto v1.7.0 layout with the published
classes of that release (PyPI opentelemetry-proto 1.35.0, generated from the v1.7.0
protos), an encoder independent of Stackhouse's, and optionally sends the request over
gRPC with grpcio. The profiles are described in JSON; the test computes what it expects
from that JSON, not from this script.

Usage: otlp_v1_7.py INPUT.json OUTPUT.pb [HOST:PORT [KEY=VALUE metadata...]]

INPUT.json: {"service": "...", "profiles": [{"sample_types": [["cpu", "nanoseconds"], ...],
  "time_nanos": N, "duration_nanos": N, "profile_id": "32 hex", "samples": [{"stack":
  ["leaf", ..., "root"], "values": [...], "attributes": {"k": "v"}, "link": ["trace hex",
  "span hex"], "timestamps": [...]}], "attributes": {"k": "v"}}], "units": {"k": "unit"}}
"""

import json
import sys

from opentelemetry.proto.collector.profiles.v1development import profiles_service_pb2 as service
from opentelemetry.proto.common.v1 import common_pb2 as common
from opentelemetry.proto.profiles.v1development import profiles_pb2 as profiles
from opentelemetry.proto.resource.v1 import resource_pb2 as resource

METHOD = "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"


def check_release():
    """Refuses to run against another release: the point is v1.7.0's field numbers."""
    fields = {f.name: f.number for f in profiles.Sample.DESCRIPTOR.fields}
    if fields.get("locations_start_index") != 1 or fields.get("value") != 3:
        sys.exit(f"opentelemetry-proto is not the v1.7.0 layout (Sample fields {fields})")


class Tables:
    """v1.7 tables: only the string table has a zero value at index 0."""

    def __init__(self, dictionary):
        self.d = dictionary
        self.strings = {}
        self.functions = {}
        self.attributes = {}
        self.links = {}
        self.string("")

    def string(self, s):
        if s not in self.strings:
            self.strings[s] = len(self.d.string_table)
            self.d.string_table.append(s)
        return self.strings[s]

    def location(self, name):
        """One function and one location per frame name; returns the location index."""
        if name not in self.functions:
            function = self.d.function_table.add()
            function.name_strindex = self.string(name)
            location = self.d.location_table.add()
            line = location.line.add()
            line.function_index = len(self.d.function_table) - 1
            line.line = 10 + len(self.functions)
            self.functions[name] = len(self.d.location_table) - 1
        return self.functions[name]

    def attribute(self, key, value):
        if (key, value) not in self.attributes:
            kv = self.d.attribute_table.add()
            kv.key = key
            kv.value.string_value = value
            self.attributes[(key, value)] = len(self.d.attribute_table) - 1
        return self.attributes[(key, value)]

    def link(self, trace_hex, span_hex):
        if (trace_hex, span_hex) not in self.links:
            link = self.d.link_table.add()
            link.trace_id = bytes.fromhex(trace_hex)
            link.span_id = bytes.fromhex(span_hex)
            self.links[(trace_hex, span_hex)] = len(self.d.link_table) - 1
        return self.links[(trace_hex, span_hex)]


def encode(spec):
    request = service.ExportProfilesServiceRequest()
    tables = Tables(request.dictionary)
    rp = request.resource_profiles.add()
    kv = rp.resource.attributes.add()
    kv.key = "service.name"
    kv.value.string_value = spec["service"]
    sp = rp.scope_profiles.add()
    sp.scope.name = "otlp_v1_7.py"
    for p in spec["profiles"]:
        profile = sp.profiles.add()
        for type_name, unit in p["sample_types"]:
            vt = profile.sample_type.add()
            vt.type_strindex = tables.string(type_name)
            vt.unit_strindex = tables.string(unit)
        profile.time_nanos = p["time_nanos"]
        profile.duration_nanos = p["duration_nanos"]
        profile.profile_id = bytes.fromhex(p["profile_id"])
        profile.period_type.type_strindex = tables.string("cpu")
        profile.period_type.unit_strindex = tables.string("nanoseconds")
        profile.period = p.get("period", 10_000_000)
        for key, value in p.get("attributes", {}).items():
            profile.attribute_indices.append(tables.attribute(key, value))
        for s in p["samples"]:
            sample = profile.sample.add()
            sample.locations_start_index = len(profile.location_indices)
            sample.locations_length = len(s["stack"])
            for frame in s["stack"]:
                profile.location_indices.append(tables.location(frame))
            sample.value.extend(s["values"])
            for key, value in s.get("attributes", {}).items():
                sample.attribute_indices.append(tables.attribute(key, value))
            if "link" in s:
                sample.link_index = tables.link(*s["link"])
            sample.timestamps_unix_nano.extend(s.get("timestamps", []))
    for key, unit in spec.get("units", {}).items():
        u = request.dictionary.attribute_units.add()
        u.attribute_key_strindex = tables.string(key)
        u.unit_strindex = tables.string(unit)
    return request.SerializeToString()


def send(target, body, metadata):
    import grpc

    with grpc.insecure_channel(target) as channel:
        export = channel.unary_unary(METHOD)
        try:
            response = export(body, metadata=metadata, timeout=60)
            decoded = service.ExportProfilesServiceResponse.FromString(response)
            print(json.dumps({
                "ok": True,
                "rejected_profiles": decoded.partial_success.rejected_profiles,
                "error_message": decoded.partial_success.error_message,
            }))
        except grpc.RpcError as error:
            print(json.dumps({"ok": False, "code": error.code().name, "details": error.details()}))


def main():
    check_release()
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    body = encode(spec)
    with open(sys.argv[2], "wb") as f:
        f.write(body)
    if len(sys.argv) > 3:
        metadata = [tuple(item.split("=", 1)) for item in sys.argv[4:]]
        send(sys.argv[3], body, metadata)


if __name__ == "__main__":
    main()
