// Usage: node read.mjs <pprof file, gzipped or raw>
// Prints the profile with every id resolved: sample types, period, and per sample its
// locations (leaf first, as pprof orders them), values and labels. Numbers that may be
// 64-bit are printed as decimal strings.
import { readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { Profile } from 'pprof-format';

const raw = readFileSync(process.argv[2]);
const gzipped = raw.length >= 2 && raw[0] === 0x1f && raw[1] === 0x8b;
const profile = Profile.decode(gzipped ? gunzipSync(raw) : raw);
const str = (i) => {
  const s = profile.stringTable.strings[Number(i)];
  if (s === undefined) throw new Error(`string index ${i} out of range`);
  return s;
};
// A table whose ids are all absent (0), as the .NET profiler writes it, is positional:
// references count from 1 (what Pyroscope does with such profiles).
const byId = (items, what) => {
  const m = new Map();
  const positional = items.length > 0 && items.every((item) => String(item.id) === '0');
  for (const [i, item] of items.entries()) {
    const id = positional ? String(i + 1) : String(item.id);
    if (id === '0') throw new Error(`${what} with id 0`);
    if (m.has(id)) throw new Error(`${what} id ${id} twice`);
    m.set(id, item);
  }
  return (id) => {
    const item = m.get(String(id));
    if (item === undefined) throw new Error(`unknown ${what} id ${id}`);
    return item;
  };
};
const fn = byId(profile.function, 'function');
const mapping = byId(profile.mapping, 'mapping');
const location = byId(profile.location, 'location');
const vt = (t) => (t ? [str(t.type), str(t.unit)] : null);

console.log(JSON.stringify({
  sample_types: profile.sampleType.map(vt),
  period_type: vt(profile.periodType),
  period: String(profile.period),
  time_nanos: String(profile.timeNanos),
  duration_nanos: String(profile.durationNanos),
  samples: profile.sample.map((s) => ({
    locations: s.locationId.map((id) => {
      const l = location(id);
      return {
        address: BigInt(l.address).toString(16),
        mapping: Number(l.mappingId) === 0 ? null : str(mapping(l.mappingId).filename),
        lines: l.line.map((line) => {
          const f = fn(line.functionId);
          return { name: str(f.name), system_name: str(f.systemName), filename: str(f.filename), line: String(line.line) };
        }),
      };
    }),
    values: s.value.map(String),
    labels: s.label.map((lb) => ({ key: str(lb.key), str: str(lb.str), num: String(lb.num) })),
  })),
}));
