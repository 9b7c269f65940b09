// Times as people read and type them: local or UTC date-times and `now-6h` forms in the
// From/To fields, while the URL and the API keep the API's own values (unix nanoseconds,
// RFC 3339, `now-…`), so links keep working whatever zone the reader is in.

/** Show and read times in UTC (true) or in the browser's zone (false). */
let utc = false;

export function setUtc(value) {
  utc = Boolean(value);
}

export function isUtc() {
  return utc;
}

const pad = (n, width = 2) => String(n).padStart(width, "0");

/** The calendar fields of unix nanoseconds in the zone shown. */
function fields(nanos) {
  const d = new Date(Math.floor(nanos / 1e6));
  return utc
    ? [d.getUTCFullYear(), d.getUTCMonth() + 1, d.getUTCDate(), d.getUTCHours(), d.getUTCMinutes(), d.getUTCSeconds(), d.getUTCMilliseconds()]
    : [d.getFullYear(), d.getMonth() + 1, d.getDate(), d.getHours(), d.getMinutes(), d.getSeconds(), d.getMilliseconds()];
}

/** Unix nanoseconds as `YYYY-MM-DD HH:MM:SS` (with milliseconds when it has some). */
export function formatDateTime(nanos) {
  const [y, mo, d, h, mi, s, ms] = fields(nanos);
  const text = `${y}-${pad(mo)}-${pad(d)} ${pad(h)}:${pad(mi)}:${pad(s)}`;
  return ms ? `${text}.${pad(ms, 3)}` : text;
}

/** A label for an axis tick over a range `spanNanos` long: seconds to days. */
export function tickLabel(nanos, spanNanos) {
  const [, mo, d, h, mi, s, ms] = fields(nanos);
  const day = `${pad(mo)}-${pad(d)}`;
  if (spanNanos > 2 * 86400e9) return day;
  if (spanNanos > 86400e9) return `${day} ${pad(h)}:${pad(mi)}`;
  if (spanNanos >= 300e9) return `${pad(h)}:${pad(mi)}`;
  if (spanNanos >= 10e9) return `${pad(h)}:${pad(mi)}:${pad(s)}`;
  return `${pad(mi)}:${pad(s)}.${pad(ms, 3)}`;
}

/** Relative forms the API reads: `now`, `now-30s`, `now-15m`, `now-6h`, `now-7d`, `now-2w`. */
const RELATIVE = /^now(-\d+(\.\d+)?\s*(s|m|min|h|d|w))?$/;
const DATE_TIME = /^(\d{4})-(\d{1,2})-(\d{1,2})(?:[ T](\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?)?$/;

/**
 * What a From/To field's text stands for, as the API reads it: relative forms and unix
 * nanoseconds as typed, RFC 3339 with a zone as typed, a date-time without a zone in the
 * zone shown, in unix nanoseconds. Null when it is none of these.
 */
export function readTime(text) {
  const t = text.trim();
  if (!t) return null;
  if (RELATIVE.test(t) || /^\d{10,}$/.test(t)) return t.replace(/\s+/g, "");
  const m = DATE_TIME.exec(t);
  if (m) {
    const [y, mo, d, h = 0, mi = 0, s = 0] = m.slice(1, 7).map((v) => Number(v || 0));
    const fraction = (m[7] || "").padEnd(9, "0");
    const millis = utc ? Date.UTC(y, mo - 1, d, h, mi, s) : new Date(y, mo - 1, d, h, mi, s).getTime();
    if (Number.isNaN(millis)) return null;
    // Whole seconds through BigInt: nanoseconds of today's dates exceed 2^53.
    return (BigInt(millis) * 1_000_000n + BigInt(fraction)).toString();
  }
  if (/[zZ]|[+-]\d{2}:?\d{2}$/.test(t) && !Number.isNaN(Date.parse(t))) return t;
  return null;
}

/** The text a From/To field shows for an API value: relative forms as they are, instants as date-times. */
export function showTime(value) {
  if (!value || RELATIVE.test(value)) return value;
  if (/^\d+$/.test(value)) return formatDateTime(Number(value));
  const parsed = Date.parse(value);
  return Number.isNaN(parsed) ? value : formatDateTime(parsed * 1e6);
}

/** The zone's name as shown beside the fields. */
export function zoneName() {
  return utc ? "UTC" : Intl.DateTimeFormat().resolvedOptions().timeZone || "local";
}

// Axis steps from a millisecond to a week, in nanoseconds.
const TICK_STEPS = [
  1e6, 2e6, 5e6, 10e6, 20e6, 50e6, 100e6, 200e6, 500e6,
  ...[1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800].map((s) => s * 1e9),
];

/** The smallest readable step that puts ticks at least `minPixels` apart on `width` pixels over `span`. */
export function tickStep(span, width, minPixels) {
  return TICK_STEPS.find((s) => (s / span) * width >= minPixels) || TICK_STEPS[TICK_STEPS.length - 1];
}
