// The page: controls, URL state and the query API calls behind the chart, the flame graph
// and the table. Every query parameter in the URL has the API's own name, so a link (or a
// dashboard's deep link) reproduces a view.

import { Api } from "./api.js";
import { SelectorAutocomplete } from "./autocomplete.js";
import { FlameGraph } from "./flamegraph.js";
import { SERIES_COLORS, exact, formatTime, formatValue, parseTime, percent, rfc3339 } from "./format.js";
import { FunctionTable } from "./table.js";
import { TimeChart, stepFor } from "./timeseries.js";

/** URL parameters, in the order written. `view`, `search` and `tenant` are the page's own. */
const PARAMS = [
  "view", "profile_type", "selector", "from", "to", "group_by", "max_nodes",
  "trace_id", "span_id", "profile_id",
  "baseline_selector", "baseline_from", "baseline_to",
  "comparison_selector", "comparison_from", "comparison_to",
  "search", "tenant",
];
const DEFAULTS = { view: "flamegraph", from: "now-1h", to: "now" };
const ID_FILTERS = ["trace_id", "span_id", "profile_id"];
const TOP_LIMIT = 500;
const SIDE_COLORS = { baseline: "#3b6fb6", comparison: "#e07b39" };

const $ = (id) => document.getElementById(id);

function readUrl() {
  const query = new URLSearchParams(window.location.search);
  const state = {};
  for (const name of PARAMS) state[name] = query.get(name) ?? DEFAULTS[name] ?? "";
  if (!query.has("tenant")) state.tenant = localStorage.getItem("stackhouse.tenant") || "";
  return state;
}

function writeUrl(push) {
  const query = new URLSearchParams();
  for (const name of PARAMS) if (state[name] && state[name] !== DEFAULTS[name]) query.set(name, state[name]);
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
const flame = new FlameGraph($("flamegraph"), tooltip, (node) => ($("reset-zoom").disabled = !node));
const chart = new TimeChart($("chart"), tooltip, brushed);
const table = new FunctionTable($("top-table"), (name) => {
  $("search").value = `/^${name.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")}$/`;
  search();
});
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

// --- controls <-> state ---------------------------------------------------------------

const FIELDS = {
  selector: "selector", from: "from", to: "to",
  baseline_selector: "baseline-selector", baseline_from: "baseline-from", baseline_to: "baseline-to",
  comparison_selector: "comparison-selector", comparison_from: "comparison-from", comparison_to: "comparison-to",
  tenant: "tenant", search: "search",
};

function fillControls() {
  for (const [name, id] of Object.entries(FIELDS)) $(id).value = state[name];
  ensureOption($("profile-type"), state.profile_type);
  $("profile-type").value = state.profile_type;
  ensureOption($("group-by"), state.group_by);
  $("group-by").value = state.group_by;
  $("preset").value = state.to === "now" && [...$("preset").options].some((o) => o.value === state.from) ? state.from : "";
  ensureOption($("service"), serviceOf(state.selector));
  $("service").value = serviceOf(state.selector);
  $("diff-controls").hidden = state.view !== "diff";
  for (const tab of document.querySelectorAll(".tabs button")) {
    tab.setAttribute("aria-selected", String(tab.dataset.view === state.view));
  }
  renderIdChips();
}

function readControls() {
  for (const [name, id] of Object.entries(FIELDS)) state[name] = $(id).value.trim();
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
  for (const id of ["chart-message", "flame-message", "table-message"]) panelMessage(id, message);
  $("stats").textContent = "";
  $("search-result").textContent = "";
}

function describeScope() {
  const selector = state.view === "diff" ? "" : ` matching ${state.selector || "{}"}`;
  return `${state.profile_type}${selector} between ${state.from} and ${state.to}`;
}

// --- queries --------------------------------------------------------------------------

function scope() {
  const params = { profile_type: state.profile_type, selector: state.selector, from: state.from, to: state.to };
  for (const name of ID_FILTERS) params[name] = state[name];
  return params;
}

function diffParams() {
  const params = { profile_type: state.profile_type, max_nodes: state.max_nodes };
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
  const data = await api.json("/api/v1/timeseries", { ...scope(), group_by: state.group_by, step }, signal);
  shown = { from: data.from, to: data.to };
  chart.show(data);
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
  const data = await api.json("/api/v1/flamegraph", { ...scope(), group_by: state.group_by, max_nodes: state.max_nodes }, signal);
  const elapsed = performance.now() - started;
  flame.show(data, "single");
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
  const data = await api.json("/api/v1/top", { ...scope(), limit: TOP_LIMIT }, signal);
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
  readControls();
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
        `No profiles stored between ${state.from} and ${state.to}${state.tenant ? ` for tenant ${state.tenant}` : ""}. ` +
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
    state[`${side}_from`] = rfc3339(from);
    state[`${side}_to`] = rfc3339(to);
    fillControls();
    markDiffSides();
    run();
    return;
  }
  $("from").value = rfc3339(from);
  $("to").value = rfc3339(to);
  $("preset").value = "";
  run();
}

function download(format) {
  const [path, params] =
    state.view === "diff"
      ? ["/api/v1/diff", { ...diffParams(), format }]
      : ["/api/v1/flamegraph", { ...scope(), group_by: state.group_by, format }];
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
    $("from").value = $("preset").value;
    $("to").value = "now";
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
  $("reset-zoom").addEventListener("click", () => flame.reset());
  $("zoom-out").addEventListener("click", () => {
    if (!shown) return;
    const half = shown.to - shown.from;
    $("from").value = rfc3339(shown.from - half / 2);
    $("to").value = rfc3339(Math.min(shown.to + half / 2, Date.now() * 1e6));
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

fillControls();
bind();
run({ push: false });

// For tests and the browser console.
window.stackhouse = { state, flame, chart, table, formatTime };
