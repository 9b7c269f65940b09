// The page: controls, URL state and the query API calls behind the chart, the flame graph,
// the timeline, the sandwich, the call graph, the bottom-up tree and the table. Every query
// parameter in the URL has the API's own name, so a link (or a dashboard's deep link)
// reproduces a view.

import { Api } from "./api.js";
import { SelectorAutocomplete } from "./autocomplete.js";
import { BottomUpTable } from "./bottomup.js";
import { CallGraphView } from "./callgraph.js";
import { ComparePresets } from "./compare.js";
import { FilterBar, RULE_PARAMS, frameParams, functionRule, stackParams } from "./filters.js";
import { FlameGraph } from "./flamegraph.js";
import { FrameMenu } from "./framemenu.js";
import { SERIES_COLORS, exact, formatValue, parseTime, percent, rfc3339 } from "./format.js";
import { sandwich } from "./sandwich.js";
import { FunctionTable } from "./table.js";
import { formatDateTime, readTime, setUtc, showTime, zoneName } from "./time.js";
import { Timeline } from "./timeline.js";
import { TimeChart, stepFor } from "./timeseries.js";

/**
 * URL parameters, in the order written. `view`, `search`, `tenant`, `tz` (time zone shown),
 * `lane` (the timeline's lane key), `events` (the most samples it reads), `function`
 * (the sandwich's) and `compare`, `compare_label`, `compare_value` (the diff's comparison
 * preset) are the page's own. `focus`, `drop`, `hide` and `preset` are repeated.
 */
const PARAMS = [
  "view", "profile_type", "selector", "from", "to", "group_by", "max_nodes",
  "trace_id", "span_id", "profile_id",
  ...RULE_PARAMS, "aggregate_by",
  "baseline_selector", "baseline_from", "baseline_to",
  "comparison_selector", "comparison_from", "comparison_to",
  "compare", "compare_label", "compare_value",
  "search", "tenant", "tz", "lane", "function", "events",
];
const LISTS = new Set(RULE_PARAMS);
const DEFAULTS = { view: "flamegraph", from: "now-1h", to: "now", lane: "thread", events: "100000" };
/** Fields holding times: shown as date-times in the zone picked, kept as the API reads them. */
const TIME_FIELDS = ["from", "to", "baseline_from", "baseline_to", "comparison_from", "comparison_to"];
/** The timeline reads at most `events` samples (100,000 unless the URL says), in pages of this many; the rest is reported. */
const EVENTS_PAGE = 10_000;
const ID_FILTERS = ["trace_id", "span_id", "profile_id"];
const TOP_LIMIT = 500;
const SIDE_COLORS = { baseline: "#3b6fb6", comparison: "#e07b39" };

const $ = (id) => document.getElementById(id);

function readUrl() {
  const query = new URLSearchParams(window.location.search);
  const state = {};
  for (const name of PARAMS) state[name] = query.get(name) ?? DEFAULTS[name] ?? "";
  for (const name of LISTS) state[name] = query.getAll(name).flatMap((v) => (name === "preset" ? v.split(",") : [v])).filter(Boolean);
  if (!query.has("tenant")) state.tenant = localStorage.getItem("stackhouse.tenant") || "";
  return state;
}

function writeUrl(push) {
  const query = new URLSearchParams();
  for (const name of PARAMS) {
    if (LISTS.has(name)) state[name].forEach((value) => query.append(name, value));
    else if (state[name] && state[name] !== DEFAULTS[name]) query.set(name, state[name]);
  }
  const url = `${window.location.pathname}${query.size ? `?${query}` : ""}`;
  if (url !== `${window.location.pathname}${window.location.search}`) {
    window.history[push ? "pushState" : "replaceState"](null, "", url);
  }
}

const state = readUrl();
const api = new Api(
  () => state.tenant,
  () => $("token").value.trim(),
);
const tooltip = $("tooltip");
const frameMenu = new FrameMenu(
  $("frame-menu"),
  (kind, name) => filters.add(kind, functionRule(name)),
  (name) => openSandwich(name),
);
const flame = new FlameGraph(
  $("flamegraph"),
  tooltip,
  (node) => {
    $("reset-zoom").disabled = !node;
    $("sandwich-zoomed").disabled = !node || flame.mode === "diff";
  },
  { onMenu: (node, x, y) => frameMenu.open(node.name, x, y, $("flamegraph")) },
);
const chart = new TimeChart($("chart"), tooltip, brushed, openExemplar);
const table = new FunctionTable(
  $("top-table"),
  (name) => {
    if (state.view === "sandwich") return openSandwich(name);
    $("search").value = `/^${name.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")}$/`;
    search();
  },
  (name) => openSandwich(name),
);
const timeline = new Timeline($("timeline"), tooltip, focusFrame);
const callers = new FlameGraph($("callers"), tooltip, () => {}, { inverted: true });
const callees = new FlameGraph($("callees"), tooltip, () => {});
const callgraph = new CallGraphView($("callgraph"));
const bottomup = new BottomUpTable($("bottomup-table"));
const filters = new FilterBar(
  {
    form: $("filter-bar"), kind: $("rule-kind"), field: $("rule-field"), pattern: $("rule-pattern"),
    chips: $("rule-chips"), presets: $("filter-presets"), granularity: $("aggregate-by"),
  },
  state,
  () => run(),
);
/** Frames (caller first) to zoom the flame graph to once it is drawn: a timeline click. */
let pendingFocus = null;
/** The query running now; a new one aborts it. */
let running = null;
/** The absolute range of the last chart answer, in unix nanoseconds. */
let shown = null;

/** Label names and values for the pickers and autocomplete, per tenant and range. */
const labels = {
  cache: new Map(),
  key: (what) => JSON.stringify([state.tenant, state.from, state.to, what]),
  get(what, path) {
    const key = this.key(what);
    if (!this.cache.has(key)) {
      const answer = api.json(path, { from: state.from, to: state.to });
      this.cache.set(key, answer);
      answer.catch(() => this.cache.delete(key));
    }
    return this.cache.get(key);
  },
  async names() {
    return (await this.get("", "/api/v1/labels")).names;
  },
  async values(name) {
    return (await this.get(name, `/api/v1/labels/${encodeURIComponent(name)}/values`)).values;
  },
};

const compare = new ComparePresets(
  {
    kind: $("compare"), label: $("compare-label"), value: $("compare-value"),
    labelBox: $("compare-label-box"), valueBox: $("compare-value-box"), message: $("compare-message"),
  },
  state,
  labels,
  () => {
    fillControls();
    run();
  },
);

// --- controls <-> state ---------------------------------------------------------------

const FIELDS = {
  selector: "selector", baseline_selector: "baseline-selector", comparison_selector: "comparison-selector",
  tenant: "tenant", search: "search",
};
const fieldOf = (name) => $(name.replace("_", "-"));

/** Shows a time field's value in the zone picked; the shown text marks it as not edited. */
function fillTime(name) {
  const field = fieldOf(name);
  field.value = showTime(state[name]);
  field.dataset.shown = field.value;
}

/** Sets a time from the page (a drag, a zoom, a preset): the state as the API reads it, the field as shown. */
function setTime(name, value) {
  state[name] = value;
  fillTime(name);
}

function fillControls() {
  for (const [name, id] of Object.entries(FIELDS)) $(id).value = state[name];
  setUtc(state.tz === "utc");
  for (const name of TIME_FIELDS) fillTime(name);
  $("zone").value = state.tz === "utc" ? "utc" : "";
  ensureOption($("lane-key"), state.lane);
  $("lane-key").value = state.lane;
  ensureOption($("profile-type"), state.profile_type);
  $("profile-type").value = state.profile_type;
  ensureOption($("group-by"), state.group_by);
  $("group-by").value = state.group_by;
  $("preset").value = state.to === "now" && [...$("preset").options].some((o) => o.value === state.from) ? state.from : "";
  ensureOption($("service"), serviceOf(state.selector));
  $("service").value = serviceOf(state.selector);
  $("diff-controls").hidden = state.view !== "diff";
  $("timeline-panel").hidden = state.view !== "timeline";
  $("callgraph-panel").hidden = state.view !== "callgraph";
  $("bottomup-panel").hidden = state.view !== "bottomup";
  $("split").hidden = ["timeline", "callgraph", "bottomup"].includes(state.view);
  $("sandwich-panel").hidden = state.view !== "sandwich";
  $("flame-panel").hidden = state.view === "sandwich";
  for (const tab of document.querySelectorAll(".tabs button")) {
    tab.setAttribute("aria-selected", String(tab.dataset.view === state.view));
  }
  renderIdChips();
  filters.render();
  compare.render();
}

/** Reads the controls into the state; a time field edited to something unreadable throws. */
function readControls() {
  for (const [name, id] of Object.entries(FIELDS)) state[name] = $(id).value.trim();
  for (const name of TIME_FIELDS) {
    const field = fieldOf(name);
    const text = field.value.trim();
    // Untouched fields keep the exact value behind them (a shown date-time drops nanoseconds).
    if (text === field.dataset.shown) continue;
    const value = text ? readTime(text) : "";
    if (value === null) {
      throw new Error(
        `cannot read ${name.replace("_", " ")} "${text}": type a date-time (YYYY-MM-DD HH:MM:SS, in ${zoneName()}), now-6h, unix nanoseconds or RFC 3339`,
      );
    }
    state[name] = value;
  }
  state.profile_type = $("profile-type").value;
  state.group_by = $("group-by").value;
}

function ensureOption(select, value, label = value) {
  if (value && ![...select.options].some((o) => o.value === value)) select.add(new Option(label, value));
}

function setOptions(select, values, keep) {
  const current = select.value;
  select.replaceChildren(...keep.map((o) => new Option(o.label, o.value)), ...values.map((v) => new Option(v, v)));
  ensureOption(select, current);
  select.value = current;
}

// `service.name="x"` inside a selector, which the service picker reads and rewrites.
const SERVICE_MATCHER = /service\.name\s*=\s*"((?:[^"\\]|\\.)*)"/;

function serviceOf(selector) {
  const match = SERVICE_MATCHER.exec(selector);
  return match ? match[1].replace(/\\(.)/g, "$1") : "";
}

function withService(selector, service) {
  const matcher = `service.name="${service.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`;
  const body = (selector.trim().replace(/^\{|\}$/g, "") || "").trim();
  const others = body.replace(SERVICE_MATCHER, "").replace(/^\s*,|,\s*(?=,|$)/g, "").trim();
  const parts = [service ? matcher : "", others].filter(Boolean);
  return parts.length ? `{${parts.join(", ")}}` : "";
}

function renderIdChips() {
  $("lookup-active").replaceChildren(
    ...ID_FILTERS.filter((name) => state[name]).map((name) => {
      const chip = document.createElement("span");
      chip.className = "chip";
      chip.textContent = `${name}=${state[name]}`;
      const remove = document.createElement("button");
      remove.type = "button";
      remove.textContent = "×";
      remove.title = `stop filtering by ${name}`;
      remove.addEventListener("click", () => {
        state[name] = "";
        renderIdChips();
        run();
      });
      chip.append(remove);
      return chip;
    }),
  );
}

// --- messages -------------------------------------------------------------------------

function showError(message) {
  $("error").textContent = message;
  $("error").hidden = !message;
}

function panelMessage(id, text) {
  $(id).textContent = text || "";
  $(id).hidden = !text;
}

function clearPanels(message) {
  chart.clear();
  flame.clear();
  table.clear();
  timeline.clear();
  callers.clear();
  callees.clear();
  callgraph.clear();
  bottomup.clear();
  $("timeline-status").hidden = true;
  for (const id of ["chart-message", "flame-message", "table-message", "timeline-message", "sandwich-message", "callgraph-message", "bottomup-message"]) {
    panelMessage(id, message);
  }
  $("stats").textContent = "";
  $("search-result").textContent = "";
}

function describeScope() {
  const selector = state.view === "diff" ? "" : ` matching ${state.selector || "{}"}`;
  return `${state.profile_type}${selector} between ${showTime(state.from)} and ${showTime(state.to)}`;
}

// --- queries --------------------------------------------------------------------------

function scope() {
  const params = { profile_type: state.profile_type, selector: state.selector, from: state.from, to: state.to };
  for (const name of ID_FILTERS) params[name] = state[name];
  return params;
}

function diffParams() {
  const params = { profile_type: state.profile_type, max_nodes: state.max_nodes, ...frameParams(state) };
  for (const side of ["baseline", "comparison"]) {
    for (const part of ["selector", "from", "to"]) params[`${side}_${part}`] = state[`${side}_${part}`];
  }
  return params;
}

async function loadProfileTypes(signal) {
  const { profile_types: types } = await api.json("/api/v1/profile-types", { from: state.from, to: state.to }, signal);
  setOptions($("profile-type"), types.map((t) => t.id), []);
  if (!state.profile_type && types.length) {
    state.profile_type = (types.find((t) => /cpu/.test(t.id)) || types[0]).id;
  }
  $("profile-type").value = state.profile_type;
  return types;
}

/** The pickers that depend on labels; their failures only leave them as they were. */
async function loadPickers() {
  try {
    const [names, services] = await Promise.all([labels.names(), labels.values("service.name").catch(() => [])]);
    setOptions($("service"), services, [{ label: "all services", value: "" }]);
    $("service").value = serviceOf(state.selector);
    setOptions($("group-by"), [...names, ...ID_FILTERS], [{ label: "nothing", value: "" }]);
    $("group-by").value = state.group_by;
  } catch {
    // The query itself reports what is wrong.
  }
}

async function loadChart(signal) {
  const now = Date.now() * 1e6;
  const [from, to] = [parseTime(state.from, now), parseTime(state.to, now)];
  const step = from !== null && to !== null && to > from ? stepFor(to - from, $("chart").parentElement.clientWidth) / 1e9 : "";
  const data = await api.json("/api/v1/timeseries", { ...scope(), ...stackParams(state), group_by: state.group_by, step }, signal);
  shown = { from: data.from, to: data.to };
  chart.show(data);
  if (state.view !== "diff") loadExemplars(data, signal);
  const total = data.series.reduce((sum, s) => sum + s.total, 0);
  panelMessage("chart-message", total ? "" : `No samples of ${describeScope()}.`);
  $("chart-legend").replaceChildren(
    ...data.series.slice(0, SERIES_COLORS.length).filter((s) => Object.keys(s.group || {}).length).map((s, i) => {
      const item = document.createElement("span");
      item.className = "legend-item";
      item.style.setProperty("--color", SERIES_COLORS[i % SERIES_COLORS.length]);
      item.textContent = Object.entries(s.group).map(([k, v]) => `${k}=${v || "∅"}`).join(", ");
      return item;
    }),
  );
  return data;
}

async function loadFlamegraph(signal) {
  const started = performance.now();
  const data = await api.json("/api/v1/flamegraph", { ...scope(), ...frameParams(state), group_by: state.group_by, max_nodes: state.max_nodes }, signal);
  const elapsed = performance.now() - started;
  flame.show(data, "single");
  if (pendingFocus) flame.zoomToPath(pendingFocus);
  pendingFocus = null;
  panelMessage("flame-message", data.total ? "" : `No samples of ${describeScope()}.`);
  $("flame-title").textContent = `Flame graph · ${formatValue(data.total, data.unit)} total`;
  $("stats").textContent = statsLine(data.stats, elapsed);
  search();
}

function statsLine(stats, elapsed) {
  const took = `answered in ${Math.round(elapsed)} ms`;
  if (!stats) return took;
  // Rows per resolution: raw samples, and the 1m and 1h rollup tiers long ranges read.
  const tiers = Object.entries(stats.rows_by_tier || {}).map(([tier, rows]) => `${tier} ${exact(rows)}`).join(", ");
  const widened = stats.answered
    ? `; covers ${new Date(stats.answered[0] / 1e6).toISOString()} to ${new Date(stats.answered[1] / 1e6).toISOString()} (only rollups are left at the range's edge)`
    : "";
  return `${took}; scanned ${exact(stats.rows_scanned)} rows${tiers ? ` (${tiers})` : ""} in ${stats.segments} segments, ${formatValue(stats.bytes_scanned, "bytes")} of ${formatValue(stats.bytes_total, "bytes")}${widened}`;
}

async function loadTop(signal) {
  const data = await api.json("/api/v1/top", { ...scope(), ...frameParams(state), limit: TOP_LIMIT }, signal);
  const value = (v) => `${formatValue(v, data.unit)} · ${percent(v, data.total)}`;
  table.show(
    [
      { key: "name", label: "Function" },
      { key: "self", label: "Self", format: value },
      { key: "total", label: "Total", format: value },
    ],
    data.functions,
    "self",
  );
  $("table-title").textContent = `Top functions (${data.functions.length})`;
  panelMessage("table-message", data.functions.length ? "" : "No functions.");
}

// --- exemplars ------------------------------------------------------------------------

/**
 * The Connect (Pyroscope) id of one of our profile types: the served type whose last four
 * parts are ours, or, for counted CPU samples, which Connect serves as CPU time, whose
 * sample type and unit are our period's.
 */
async function connectTypeId(signal) {
  const [, , periodType, periodUnit] = state.profile_type.split(":");
  const inTime = `${periodType}:${periodUnit}:${periodType}:${periodUnit}`;
  const { profileTypes = [] } = await api.rpc(
    "/querier.v1.QuerierService/ProfileTypes",
    { start: String(Math.floor(shown.from / 1e6)), end: String(Math.ceil(shown.to / 1e6)) },
    signal,
  );
  // Connect's JSON names the field `ID`, as Pyroscope's proto does.
  const rest = (t) => (t.ID ?? t.id ?? "").split(":").slice(1).join(":");
  const found = profileTypes.find((t) => rest(t) === state.profile_type) || profileTypes.find((t) => rest(t) === inTime);
  return found && (found.ID ?? found.id);
}

/** Pyroscope's label names in a selector: `service.name` as `service_name`, which the server maps back. */
function connectSelector(selector) {
  return (selector || "{}").replace(/([{,]\s*)([A-Za-z_][\w.\-/]*)(\s*(?:=~|!~|!=|=))/g, (_, before, name, op) =>
    `${before}${name.replace(/\W/g, "_")}${op}`);
}

/**
 * Dots for the profiles behind the chart (the largest per step, from Connect's SelectSeries
 * with individual exemplars). Best effort: the chart stands without them.
 */
async function loadExemplars(data, signal) {
  try {
    const typeId = await connectTypeId(signal);
    if (!typeId) return;
    const answer = await api.rpc(
      "/querier.v1.QuerierService/SelectSeries",
      {
        profileTypeID: typeId,
        labelSelector: connectSelector(state.selector),
        start: String(Math.floor(data.from / 1e6)),
        end: String(Math.ceil(data.to / 1e6)),
        step: data.step_nanos / 1e9,
        exemplarType: "EXEMPLAR_TYPE_INDIVIDUAL",
      },
      signal,
    );
    const unit = typeId.split(":")[2];
    const dots = [];
    for (const series of answer.series || []) {
      for (const point of series.points || []) {
        for (const e of point.exemplars || []) {
          if (!e.profileId && !e.spanId) continue;
          const id = (e.profileId || "").replace(/-/g, "").toLowerCase();
          const what = id ? `profile ${id}` : `span ${e.spanId}`;
          dots.push({
            time: Number(e.timestamp) * 1e6,
            profileId: id,
            spanId: e.spanId || "",
            traceId: e.traceId || "",
            value: Number(e.value),
            label: `${what} · ${formatValue(Number(e.value), unit)}`,
          });
        }
      }
    }
    if (!signal.aborted) chart.showExemplars(dots);
  } catch (error) {
    if (error.name !== "AbortError") chart.showExemplars([]);
  }
}

/** A clicked exemplar: the flame graph of that profile (or span) alone. */
function openExemplar(exemplar) {
  for (const name of ID_FILTERS) state[name] = "";
  if (exemplar.profileId) state.profile_id = exemplar.profileId;
  else state.span_id = exemplar.spanId;
  if (state.view !== "flamegraph" && state.view !== "sandwich") state.view = "flamegraph";
  fillControls();
  run();
}

// --- timeline -------------------------------------------------------------------------

/** Events of the range, page by page up to the budget; says what was left out. */
async function loadTimeline(signal, chartDone) {
  const pages = [];
  let loaded = 0;
  let loadedValue = 0;
  let cursor;
  const budget = Math.max(Number(state.events) || Number(DEFAULTS.events), 1);
  let limit = Math.min(EVENTS_PAGE, budget);
  $("timeline-status").hidden = true;
  panelMessage("timeline-message", "Loading samples…");
  do {
    let page;
    try {
      const asked = limit === undefined ? undefined : Math.min(limit, budget - loaded);
      page = await api.json("/api/v1/events", { ...scope(), limit: asked, cursor }, signal);
    } catch (error) {
      // A server with a smaller --query-max-events: its own default page size.
      if (error.status !== 400 || limit === undefined || !/limit/.test(error.message)) throw error;
      limit = undefined;
      continue;
    }
    pages.push(page);
    loaded += page.events.length;
    for (const event of page.events) loadedValue += event.value;
    cursor = page.next_cursor;
  } while (cursor && loaded < budget);
  const chartData = await chartDone;
  const info = pages[0] || { unit: chartData.unit };
  const names = new Set(["thread"]);
  for (const page of pages) {
    for (const labels of Object.values(page.series)) Object.keys(labels).forEach((k) => names.add(k));
    for (const event of page.events.slice(0, 1000)) Object.keys(event.attributes).forEach((k) => names.add(k));
  }
  setOptions($("lane-key"), [...names].filter((n) => n !== "thread").sort(), [{ label: "thread", value: "thread" }]);
  $("lane-key").value = state.lane;
  timeline.show(pages, info, state.lane || "thread", chartData.from, chartData.to);
  panelMessage("timeline-message", loaded ? "" : `No samples of ${describeScope()}.`);
  $("timeline-title").textContent = `Timeline · ${exact(loaded)} samples in ${timeline.lanes.length} lanes`;
  if (cursor) {
    const total = chartData.series.reduce((sum, s) => sum + s.total, 0);
    const last = pages[pages.length - 1].events.at(-1).timestamp;
    const left = Math.max(total - loadedValue, 0);
    $("timeline-left-out").textContent =
      `Only the first ${exact(loaded)} samples are shown (up to ${formatDateTime(last)}): ` +
      `${formatValue(left, chartData.unit)} (${percent(left, total)} of the range's ${formatValue(total, chartData.unit)}) ` +
      "after them are left out. Narrow the range to see them.";
    $("timeline-left-out").dataset.leftOut = String(left);
    $("timeline-left-out").dataset.loaded = String(loaded);
    // `to` is exclusive: a microsecond past the last sample read keeps it in.
    $("timeline-narrow").dataset.to = String(last + 1000);
    $("timeline-status").hidden = false;
  }
}

/** A frame clicked on the timeline: the flame graph of the range shown, zoomed to that frame. */
function focusFrame({ frames, from, to }) {
  state.view = "flamegraph";
  state.from = String(Math.floor(from));
  state.to = String(Math.ceil(to));
  state.group_by = "";
  pendingFocus = frames;
  fillControls();
  run();
}

// --- sandwich -------------------------------------------------------------------------

function openSandwich(name) {
  state.view = "sandwich";
  state.function = name;
  fillControls();
  run();
}

async function loadSandwich(signal) {
  const data = await api.json("/api/v1/flamegraph", { ...scope(), ...frameParams(state), max_nodes: state.max_nodes }, signal);
  const name = state.function;
  if (!name) {
    callers.clear();
    callees.clear();
    panelMessage("sandwich-message", "Pick a function: the ⇅ button of a row of the top table, or Sandwich on a zoomed flame graph frame.");
    $("sandwich-title").textContent = "Sandwich";
    return;
  }
  const { callers: up, callees: down } = sandwich(data.root, name);
  callers.show({ ...data, root: up, total: up.total }, "single");
  callees.show({ ...data, root: down, total: down.total }, "single");
  panelMessage("sandwich-message", up.total ? "" : `${name} is not in ${describeScope()}.`);
  $("sandwich-title").textContent = `Sandwich of ${name} · ${formatValue(down.total, data.unit)} (${percent(down.total, data.total)})`;
}

// --- call graph and bottom-up ----------------------------------------------------------

/** The flame graph of the selection without groups, which both views read. */
function loadTree(signal) {
  return api.json("/api/v1/flamegraph", { ...scope(), ...frameParams(state), max_nodes: state.max_nodes }, signal);
}

async function loadCallgraph(signal) {
  const data = await loadTree(signal);
  callgraph.show(data);
  const { functions, edges, dropped } = callgraph.graph;
  panelMessage("callgraph-message", data.total ? "" : `No samples of ${describeScope()}.`);
  $("callgraph-title").textContent =
    `Call graph · ${functions.length} functions${dropped ? ` (the ${functions.length} largest of ${functions.length + dropped})` : ""}, ` +
    `${edges.length} calls · ${formatValue(data.total, data.unit)} total`;
}

async function loadBottomup(signal) {
  const data = await loadTree(signal);
  bottomup.show(data);
  panelMessage("bottomup-message", bottomup.rows.length ? "" : `No samples of ${describeScope()}.`);
  $("bottomup-title").textContent = `Bottom-up · ${bottomup.rows.length} functions · ${formatValue(data.total, data.unit)} total`;
}

/** Self values per function on both sides, from the diff tree. */
function diffFunctions(root) {
  const byName = new Map();
  const walk = (node, isRoot) => {
    if (!isRoot) {
      const row = byName.get(node.name) || { name: node.name, baseline: 0, comparison: 0 };
      row.baseline += node.baseline_self;
      row.comparison += node.comparison_self;
      byName.set(node.name, row);
    }
    (node.children || []).forEach((child) => walk(child, false));
  };
  walk(root, true);
  return [...byName.values()];
}

async function loadDiff(signal) {
  const data = await api.json("/api/v1/diff", diffParams(), signal);
  flame.show(data, "diff");
  const empty = !data.baseline_total && !data.comparison_total;
  panelMessage("flame-message", empty ? "Neither side has samples." : "");
  $("flame-title").textContent = `Diff · baseline ${formatValue(data.baseline_total, data.unit)}, comparison ${formatValue(data.comparison_total, data.unit)}`;
  $("stats").textContent = "";
  const share = (value, total) => (total ? value / total : 0);
  const rows = diffFunctions(data.root).map((row) => ({
    ...row,
    change: share(row.comparison, data.comparison_total) - share(row.baseline, data.baseline_total),
  }));
  table.show(
    [
      { key: "name", label: "Function" },
      { key: "baseline", label: "Baseline self", format: (v) => `${formatValue(v, data.unit)} · ${percent(v, data.baseline_total)}` },
      { key: "comparison", label: "Comparison self", format: (v) => `${formatValue(v, data.unit)} · ${percent(v, data.comparison_total)}` },
      {
        key: "change",
        label: "Share change",
        format: (v) => `${v > 0 ? "+" : ""}${(v * 100).toFixed(2)} pp`,
        className: (row) => (row.change > 0 ? "worse" : row.change < 0 ? "better" : "same"),
      },
    ],
    rows,
    "change",
  );
  $("table-title").textContent = `Functions by change of self share (${rows.length})`;
  panelMessage("table-message", rows.length ? "" : "No functions.");
  search();
}

/** A diff needs two ranges; without them, the halves of the range shown. */
function defaultDiffSides() {
  if (!shown) return;
  const middle = Math.round((shown.from + shown.to) / 2);
  const defaults = {
    baseline_from: rfc3339(shown.from), baseline_to: rfc3339(middle),
    comparison_from: rfc3339(middle), comparison_to: rfc3339(shown.to),
    baseline_selector: state.selector, comparison_selector: state.selector,
  };
  for (const [name, value] of Object.entries(defaults)) if (!state[name]) state[name] = value;
  fillControls();
}

function markDiffSides() {
  if (state.view !== "diff") return chart.mark([]);
  const now = Date.now() * 1e6;
  const marks = ["baseline", "comparison"].map((side) => ({
    from: parseTime(state[`${side}_from`], now),
    to: parseTime(state[`${side}_to`], now),
    color: SIDE_COLORS[side],
  }));
  chart.mark(marks.filter((m) => m.from !== null && m.to !== null));
}

async function run({ push = true } = {}) {
  try {
    readControls();
  } catch (error) {
    showError(error.message);
    return;
  }
  running?.abort();
  const controller = new AbortController();
  running = controller;
  const { signal } = controller;
  showError("");
  document.body.classList.add("busy");
  try {
    // The types stored in this range, for the picker; also tells an empty range apart.
    const types = await loadProfileTypes(signal);
    writeUrl(push);
    if (!types.length) {
      clearPanels(
        `No profiles stored between ${showTime(state.from)} and ${showTime(state.to)}${state.tenant ? ` for tenant ${state.tenant}` : ""}. ` +
          "Send some (README's Quickstart) or widen the range.",
      );
      return;
    }
    loadPickers();
    const chartDone = loadChart(signal);
    if (state.view === "diff") {
      await chartDone;
      defaultDiffSides();
      writeUrl(false);
      markDiffSides();
      await loadDiff(signal);
    } else if (state.view === "timeline") {
      markDiffSides();
      await Promise.all([chartDone, loadTimeline(signal, chartDone)]);
    } else if (state.view === "sandwich") {
      markDiffSides();
      await Promise.all([chartDone, loadSandwich(signal), loadTop(signal)]);
    } else if (state.view === "callgraph") {
      markDiffSides();
      await Promise.all([chartDone, loadCallgraph(signal)]);
    } else if (state.view === "bottomup") {
      markDiffSides();
      await Promise.all([chartDone, loadBottomup(signal)]);
    } else {
      markDiffSides();
      await Promise.all([chartDone, loadFlamegraph(signal), loadTop(signal)]);
    }
  } catch (error) {
    if (error.name === "AbortError") return;
    clearPanels("");
    showError(error.message);
  } finally {
    if (running === controller) document.body.classList.remove("busy");
  }
}

function search() {
  const found = flame.search(state.search = $("search").value.trim());
  writeUrl(false);
  if (!found) {
    $("search-result").textContent = "";
    return;
  }
  const total = flame.mode === "diff" ? flame.totals.comparison : flame.info.total;
  $("search-result").dataset.value = String(found.value);
  $("search-result").textContent = found.frames
    ? `${found.frames} frames, ${formatValue(found.value, flame.info.unit)} (${percent(found.value, total)})`
    : "no match";
}

function brushed(from, to) {
  if (state.view === "diff") {
    const side = document.querySelector('input[name="brush"]:checked').value;
    state.compare = "";
    compare.render();
    setTime(`${side}_from`, String(from));
    setTime(`${side}_to`, String(to));
    markDiffSides();
    run();
    return;
  }
  setTime("from", String(from));
  setTime("to", String(to));
  $("preset").value = "";
  run();
}

function download(format) {
  const [path, params] =
    state.view === "diff"
      ? ["/api/v1/diff", { ...diffParams(), format }]
      : ["/api/v1/flamegraph", { ...scope(), ...frameParams(state), group_by: state.group_by, format }];
  const name = `stackhouse-${state.view}-${state.profile_type.replace(/[^\w.-]+/g, "_")}`;
  api.download(path, params, format === "pprof" ? `${name}.pb.gz` : `${name}.folded.txt`).catch((e) => showError(e.message));
}

function bind() {
  $("query").addEventListener("submit", (event) => {
    event.preventDefault();
    run();
  });
  $("profile-type").addEventListener("change", () => run());
  $("group-by").addEventListener("change", () => run());
  $("service").addEventListener("change", () => {
    $("selector").value = withService($("selector").value, $("service").value);
    run();
  });
  $("preset").addEventListener("change", () => {
    if (!$("preset").value) return;
    setTime("from", $("preset").value);
    setTime("to", "now");
    run();
  });
  $("token").value = localStorage.getItem("stackhouse.token") || "";
  $("token").addEventListener("change", () => {
    localStorage.setItem("stackhouse.token", $("token").value.trim());
    labels.cache.clear();
    run();
  });
  $("tenant").addEventListener("change", () => {
    localStorage.setItem("stackhouse.tenant", $("tenant").value.trim());
    $("profile-type").replaceChildren();
    state.profile_type = "";
    run();
  });
  for (const id of ["baseline-selector", "baseline-from", "baseline-to", "comparison-selector", "comparison-from", "comparison-to"]) {
    $(id).addEventListener("keydown", (event) => event.key === "Enter" && run());
  }
  for (const tab of document.querySelectorAll(".tabs button")) {
    tab.addEventListener("click", () => {
      state.view = tab.dataset.view;
      fillControls();
      run();
    });
  }
  $("lookup").addEventListener("submit", (event) => {
    event.preventDefault();
    const id = $("lookup-id").value.trim().replace(/-/g, "").toLowerCase();
    if (!id) return;
    state[$("lookup-kind").value] = id;
    $("lookup-id").value = "";
    renderIdChips();
    run();
  });
  $("search").addEventListener("input", search);
  $("zone").addEventListener("change", () => {
    // Typed but not yet run times are read in the zone they were typed in.
    try {
      readControls();
    } catch (error) {
      showError(error.message);
      $("zone").value = state.tz;
      return;
    }
    state.tz = $("zone").value;
    fillControls();
    writeUrl(false);
    chart.draw();
    timeline.draw();
  });
  $("lane-key").addEventListener("change", () => {
    state.lane = $("lane-key").value;
    run();
  });
  $("timeline-zoom-in").addEventListener("click", () => timeline.view && timeline.zoom(1 / 1.5));
  $("timeline-zoom-out").addEventListener("click", () => timeline.view && timeline.zoom(1.5));
  $("timeline-reset").addEventListener("click", () => timeline.reset());
  $("timeline-narrow").addEventListener("click", () => {
    setTime("to", $("timeline-narrow").dataset.to);
    $("preset").value = "";
    run();
  });
  $("sandwich-zoomed").addEventListener("click", () => flame.zoomed && openSandwich(flame.zoomed.name));
  $("reset-zoom").addEventListener("click", () => flame.reset());
  $("zoom-out").addEventListener("click", () => {
    if (!shown) return;
    const half = shown.to - shown.from;
    setTime("from", String(Math.round(shown.from - half / 2)));
    setTime("to", String(Math.round(Math.min(shown.to + half / 2, Date.now() * 1e6))));
    $("preset").value = "";
    run();
  });
  $("download-pprof").addEventListener("click", () => download("pprof"));
  $("download-folded").addEventListener("click", () => download("folded"));
  window.addEventListener("popstate", () => {
    Object.assign(state, readUrl());
    fillControls();
    run({ push: false });
  });
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && document.activeElement === document.body) flame.reset();
  });
  new SelectorAutocomplete($("selector"), $("selector-suggestions"), labels);
}

// Read before fillControls picks the zone of the URL.
$("zone-local").textContent = `local (${zoneName()})`;
fillControls();
bind();
filters.loadPresets(api);
run({ push: false });

// For tests and the browser console.
window.stackhouse = { state, flame, chart, table, timeline, callers, callees, callgraph, bottomup, formatDateTime, readTime };
