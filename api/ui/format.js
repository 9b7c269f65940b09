// Values, times and colors as people read them.

const DURATIONS = [["d", 86400e9], ["h", 3600e9], ["min", 60e9], ["s", 1e9], ["ms", 1e6], ["µs", 1e3], ["ns", 1]];
const BYTES = [["GiB", 2 ** 30], ["MiB", 2 ** 20], ["KiB", 1024], ["B", 1]];
const COUNTS = [["G", 1e9], ["M", 1e6], ["k", 1e3], ["", 1]];
// Nanoseconds per unit of the time units profilers send.
export const TIME_UNITS = { nanoseconds: 1, microseconds: 1e3, milliseconds: 1e6, seconds: 1e9 };

function digits(x) {
  const fixed = Math.abs(x) >= 100 ? x.toFixed(0) : Math.abs(x) >= 10 ? x.toFixed(1) : x.toFixed(2);
  return fixed.includes(".") ? fixed.replace(/\.?0+$/, "") : fixed;
}

function scaled(value, scale) {
  for (const [name, size] of scale) {
    if (Math.abs(value) >= size) return `${digits(value / size)} ${name}`.trimEnd();
  }
  return `${digits(value)} ${scale[scale.length - 1][0]}`.trimEnd();
}

/** `value` of `unit` (a sample unit of the API) in the largest unit that keeps it ≥ 1. */
export function formatValue(value, unit) {
  if (unit in TIME_UNITS) return scaled(value * TIME_UNITS[unit], DURATIONS);
  if (unit === "bytes") return scaled(value, BYTES);
  const count = scaled(value, COUNTS);
  return unit && unit !== "count" ? `${count} ${unit}` : count;
}

/** Exact value with separators, for tooltips where rounding would hide a difference. */
export function exact(value) {
  return Number.isInteger(value) ? value.toLocaleString("en-US") : value.toPrecision(6);
}

export function percent(part, whole) {
  if (!whole) return "0%";
  const p = (100 * part) / whole;
  return `${p >= 10 || p === 0 ? p.toFixed(1) : p.toPrecision(2)}%`;
}

/**
 * CPU time that `count` samples stand for, when the profile type samples on a time period
 * (the eBPF profiler's `samples:count:cpu:nanoseconds` at 20 Hz is 50 ms per sample).
 */
export function sampledTime(count, info) {
  if (info.unit !== "count" || !(info.period_unit in TIME_UNITS) || !info.period) return null;
  return formatValue(count * info.period, info.period_unit);
}

/** Unix nanoseconds as RFC 3339, one of the forms the API reads for `from` and `to`. */
export function rfc3339(nanos) {
  return new Date(Math.round(nanos / 1e6)).toISOString().replace(".000Z", "Z");
}

/**
 * A `from`/`to` as the API reads it (`now`, `now-<duration>`, unix nanoseconds, RFC 3339)
 * in unix nanoseconds; null for durations it does not know, which the API then judges.
 */
export function parseTime(text, now) {
  if (!text || text === "now") return now;
  const relative = /^now-(\d+(?:\.\d+)?)\s*(s|m|min|h|d|w)$/.exec(text);
  if (relative) {
    const unit = { s: 1, m: 60, min: 60, h: 3600, d: 86400, w: 604800 }[relative[2]];
    return now - Number(relative[1]) * unit * 1e9;
  }
  if (/^\d+$/.test(text)) return Number(text);
  const parsed = Date.parse(text);
  return Number.isNaN(parsed) ? null : parsed * 1e6;
}

function hash(text) {
  let h = 2166136261;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 16777619);
  return h >>> 0;
}

// Frames of one package, module or library share a color, so a flame graph reads by area.
const PALETTE = [
  "#e8a26a", "#e59a8c", "#d9b86c", "#c7c46a", "#e5b58a", "#dd8f6e", "#e0a5b5",
  "#cfa77c", "#e6c17a", "#d49a6a", "#c9b38f", "#e39f79", "#dcae5f", "#d8967f",
];

/** The package-ish prefix of a frame name: before `::`, the last `.`, `/` or `+0x`. */
function family(name) {
  const library = name.indexOf("+0x");
  if (library > 0) return name.slice(0, library);
  const cut = Math.max(name.lastIndexOf("::"), name.lastIndexOf("."), name.lastIndexOf("/"));
  return cut > 0 ? name.slice(0, cut) : name;
}

export function frameColor(name) {
  return PALETTE[hash(family(name)) % PALETTE.length];
}

/** Colors of time series, one per group. */
export const SERIES_COLORS = [
  "#3b6fb6", "#e07b39", "#4ea35a", "#c44e52", "#8172b2", "#937860", "#da8bc3", "#8c8c8c", "#ccb974", "#64b5cd",
];

/**
 * A diff frame's color: red where the comparison's share grew, green where it shrank,
 * grey where it held; full strength at a change of 100% or more.
 */
export function diffColor(baselineShare, comparisonShare) {
  if (baselineShare === 0 && comparisonShare === 0) return "rgb(200,200,200)";
  const change = baselineShare === 0 ? 1 : Math.max(-1, Math.min(1, comparisonShare / baselineShare - 1));
  const t = Math.sqrt(Math.abs(change));
  const grey = [210, 210, 210];
  const to = change > 0 ? [226, 74, 64] : [72, 170, 88];
  const mix = grey.map((g, i) => Math.round(g + (to[i] - g) * t));
  return `rgb(${mix.join(",")})`;
}
