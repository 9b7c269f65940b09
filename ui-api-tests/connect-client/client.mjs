// Sends a batch of calls to a running Stackhouse and prints one JSON answer per call.
//
// Usage: node client.mjs <descriptor set (buf build output)> < calls.json
//
// calls.json: {"baseUrl": "http://127.0.0.1:4040", "calls": [call, ...]} where a call is
//   {"rpc": "querier.v1.QuerierService/SelectMergeStacktraces", "binary": true,
//    "headers": {...}, "request": <protojson>}
// sent by connect-es, binary (as Grafana's datasource backend) or JSON (as the Drilldown
// app's generated clients), answered with {"response": <protojson>} or
// {"error": {"code", "message"}}; or a raw request, as the app hand-writes some:
//   {"fetch": "/path", "method": "POST", "headers": {...}, "body": "<text>" | "bodyBase64": "..."}
// answered with {"status", "contentType", "contentEncoding", "body" (text) , "bodyBase64"}.
import { readFileSync } from "node:fs";
import { fromBinary, fromJson, toJson, createFileRegistry } from "@bufbuild/protobuf";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { createClient, ConnectError, Code } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";

const registry = createFileRegistry(fromBinary(FileDescriptorSetSchema, readFileSync(process.argv[2])));
const input = JSON.parse(readFileSync(0, "utf8"));

function codeName(code) {
  // Code.InvalidArgument → "invalid_argument", as on the wire.
  return Code[code].replace(/([a-z])([A-Z])/g, "$1_$2").toLowerCase();
}

async function rpc(call) {
  const [serviceName, methodName] = call.rpc.split("/");
  const service = registry.getService(serviceName);
  if (!service) throw new Error(`no service ${serviceName} in the descriptor set`);
  const method = service.methods.find((m) => m.name === methodName);
  if (!method) throw new Error(`no method ${call.rpc} in the descriptor set`);
  const transport = createConnectTransport({
    baseUrl: input.baseUrl,
    httpVersion: "1.1",
    useBinaryFormat: call.binary,
  });
  const client = createClient(service, transport);
  const request = fromJson(method.input, call.request ?? {}, { registry });
  try {
    const response = await client[method.localName](request, { headers: call.headers ?? {} });
    return { response: toJson(method.output, response, { registry }) };
  } catch (e) {
    const err = ConnectError.from(e);
    return { error: { code: codeName(err.code), message: err.rawMessage } };
  }
}

async function raw(call) {
  const body = call.bodyBase64 !== undefined ? Buffer.from(call.bodyBase64, "base64") : call.body;
  const res = await fetch(input.baseUrl + call.fetch, {
    method: call.method ?? "POST",
    headers: call.headers ?? {},
    body,
  });
  const bytes = Buffer.from(await res.arrayBuffer());
  return {
    status: res.status,
    contentType: res.headers.get("content-type"),
    body: bytes.toString("utf8"),
    bodyBase64: bytes.toString("base64"),
  };
}

const answers = [];
for (const call of input.calls) {
  answers.push(call.rpc ? await rpc(call) : await raw(call));
}
process.stdout.write(JSON.stringify(answers));
