// Drives the web UI's reading aids in headless Chromium: the filter bar (a focus rule typed
// in its form, a hide from a frame's right-click menu, a drop from the keyboard menu, a
// preset toggle, the granularity switch, back/forward and reload), the bottom-up table,
// the call graph and the diff's comparison presets. Prints what the page showed as JSON;
// the Rust test (`web_ui_reading.rs`) compares it with values computed from the input.
//
// Usage: node reading.mjs < plan.json

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { session } from "./session.mjs";

const plan = JSON.parse(readFileSync(0, "utf8"));
const { browser, page, pageErrors, requests, settled, open } = await session(plan, { acceptDownloads: true });

const out = {};
const shot = (name, options = {}) => page.screenshot({ path: join(plan.screenshots, `${name}.png`), fullPage: true, ...options });

/** The URL's parameters, repeated ones as arrays. */
const params = () => {
  const query = new URL(page.url()).searchParams;
  const all = {};
  for (const key of new Set(query.keys())) {
    const values = query.getAll(key);
    all[key] = ["focus", "drop", "hide", "preset"].includes(key) ? values : values[0];
  }
  return all;
};
/** The query of the last request to `path`, repeated parameters as arrays. */
const lastRequest = (path) => {
  const url = requests.map((u) => new URL(u)).filter((u) => u.pathname === path).at(-1);
  if (!url) return null;
  const all = {};
  for (const key of new Set(url.searchParams.keys())) all[key] = url.searchParams.getAll(key);
  return all;
};

/** What the flame graph, its top table and the chart show now. */
const reading = () =>
  page.evaluate(() => {
    const { flame, table, chart } = window.stackhouse;
    // Every node with a self value, by its path: the tree as folded stacks.
    const folded = [];
    const walk = (node, path) => {
      if (path.length && node.self) folded.push([path.join(";"), node.self]);
      node.children.forEach((c) => walk(c, [...path, c.name]));
    };
    if (flame.root) walk(flame.root, []);
    return {
      total: flame.info?.total ?? null,
      folded,
      top: table.rows.map((r) => [r.name, r.self, r.total]),
      topShown: [...document.querySelectorAll("#top-table tbody td.name")].map((td) => td.textContent),
      chartTotal: chart.data ? chart.data.series.reduce((sum, s) => sum + s.total, 0) : null,
      chips: [...document.querySelectorAll("#rule-chips .chip")].map((c) => c.firstChild.textContent),
      error: document.getElementById("error").hidden ? "" : document.getElementById("error").textContent,
    };
  });

/** Page coordinates of the first drawn frame named `name` below the root. */
async function framePoint(name) {
  const frame = await page.evaluate((name) => window.stackhouse.flame.frames().find((f) => f.name === name && f.y > 0), name);
  const box = await page.$eval("#flamegraph", (c) => {
    const r = c.getBoundingClientRect();
    return { x: r.left, y: r.top };
  });
  return frame && { x: box.x + frame.x + Math.min(frame.width / 2, 20), y: box.y + frame.y + frame.height / 2 };
}

// 1. A focus rule typed in the filter bar's form: a chip, the URL, every request.
await open(plan.single);
out.unfiltered = await reading();
await page.selectOption("#rule-kind", "focus");
await page.selectOption("#rule-field", "function");
await page.fill("#rule-pattern", plan.focus);
requests.length = 0;
await page.click("#rule-add");
await settled();
out.focus = {
  ...(await reading()),
  url: params(),
  requests: {
    flamegraph: lastRequest("/api/v1/flamegraph"),
    top: lastRequest("/api/v1/top"),
    timeseries: lastRequest("/api/v1/timeseries"),
  },
};
// Its folded download carries the rule too.
{
  const [download] = await Promise.all([page.waitForEvent("download"), page.click("#download-folded")]);
  out.focus.download = readFileSync(await download.path(), "utf8");
  out.focus.downloadRequest = lastRequest("/api/v1/flamegraph");
}

// 2. A second rule, then back, forward and reload.
await page.selectOption("#rule-kind", "hide");
await page.fill("#rule-pattern", plan.hideTyped);
await page.press("#rule-pattern", "Enter");
await settled();
out.twoRules = { ...(await reading()), url: params() };
await shot("reading-filter-bar");
await page.goBack();
await settled();
out.back = { ...(await reading()), url: params() };
await page.goForward();
await settled();
out.forward = { ...(await reading()), url: params() };
await page.reload();
await settled();
out.reloaded = { ...(await reading()), url: params() };
// Removing a chip drops its rule.
await page.click(`#rule-chips .chip:has-text("${plan.hideTyped}") button`);
await settled();
out.removed = { ...(await reading()), url: params() };

// 3. Hide from a frame's right-click menu.
await open(plan.single);
const point = await framePoint(plan.hide);
await page.mouse.click(point.x, point.y, { button: "right" });
out.menu = {
  items: await page.$$eval("#frame-menu button", (items) => items.map((b) => b.textContent)),
  focused: await page.evaluate(() => document.activeElement?.textContent ?? ""),
};
await shot("reading-frame-menu");
await page.click(`#frame-menu button:has-text("Hide ${plan.hide}")`);
await settled();
out.hidden = { ...(await reading()), url: params() };

// 4. Drop from the keyboard: ↓ zooms to the widest frame, `m` opens its menu.
await open(plan.single);
await page.focus("#flamegraph");
await page.keyboard.press("ArrowDown");
out.keyboardZoom = await page.$eval("#flamegraph", (c) => c.dataset.zoom);
await page.keyboard.press("m");
out.keyboardMenu = await page.evaluate(() => ({ open: !document.getElementById("frame-menu").hidden, focused: document.activeElement?.textContent ?? "" }));
await page.keyboard.press("ArrowDown");
await page.keyboard.press("ArrowDown");
out.keyboardMenu.picked = await page.evaluate(() => document.activeElement?.textContent ?? "");
await page.keyboard.press("Enter");
await settled();
out.dropped = { ...(await reading()), url: params() };

// 5. A preset toggle.
await open(plan.single);
await page.waitForSelector(`#preset-${plan.preset}`);
await page.check(`#preset-${plan.preset}`);
await settled();
out.preset = { ...(await reading()), url: params(), request: lastRequest("/api/v1/flamegraph") };

// 6. Granularity: binary, then file.
for (const granularity of ["binary", "file"]) {
  await open(plan.single);
  await page.selectOption("#aggregate-by", granularity);
  await settled();
  out[granularity] = { ...(await reading()), url: params() };
}

// 7. A pattern the API cannot read: its message.
await open(plan.single);
await page.selectOption("#rule-kind", "focus");
await page.fill("#rule-pattern", "(");
await page.click("#rule-add");
await settled();
out.badRule = await reading();

// 8. Bottom-up: functions by self value, a function's callers, a caller's callers.
await open({ ...plan.single, view: "bottomup" });
const bottomRows = () =>
  page.$$eval("#bottomup-table tbody tr", (rows) => rows.map((tr) => ({ path: JSON.parse(tr.dataset.path), value: Number(tr.dataset.value), level: Number(tr.dataset.level), text: tr.cells[0].textContent })));
out.bottomup = { top: await bottomRows() };
await page.click(`#bottomup-table tbody tr[data-path='${JSON.stringify([plan.bottomup])}']`);
out.bottomup.expanded = await bottomRows();
// The first caller, by keyboard: focus it, → expands.
await page.focus(`#bottomup-table tbody tr[data-path='${JSON.stringify([plan.bottomup, plan.bottomupCaller])}']`);
await page.keyboard.press("ArrowRight");
out.bottomup.expandedTwice = await bottomRows();
out.bottomup.focused = await page.evaluate(() => document.activeElement?.dataset.path ?? "");
await shot("reading-bottomup");

// 9. Call graph: nodes, edges, layering, highlight on hover.
await open({ ...plan.single, view: "callgraph" });
out.callgraph = await page.evaluate(() => {
  const box = (g) => g.getBoundingClientRect();
  return {
    nodes: [...document.querySelectorAll("#callgraph .node")].map((g) => ({
      name: g.dataset.name, flat: Number(g.dataset.flat), cum: Number(g.dataset.cum),
      top: box(g).top, bottom: box(g).bottom, text: [...g.querySelectorAll("text")].map((t) => t.textContent),
    })),
    edges: [...document.querySelectorAll("#callgraph .edge")].map((g) => ({
      from: g.dataset.from, to: g.dataset.to, value: Number(g.dataset.value), label: g.querySelector("text").textContent,
    })),
    title: document.getElementById("callgraph-title").textContent,
  };
});
await page.hover(`#callgraph .node[data-name="${plan.callgraphHover}"]`);
out.callgraph.hovered = await page.evaluate(() => ({
  nodes: [...document.querySelectorAll("#callgraph .node.hl")].map((g) => g.dataset.name),
  edges: [...document.querySelectorAll("#callgraph .edge.hl")].map((g) => [g.dataset.from, g.dataset.to]),
}));
await shot("reading-callgraph");
await page.mouse.move(1, 1);

// 10. Diff presets: the same range a week earlier, then the previous value of a label.
await open({ ...plan.single, view: "diff" });
requests.length = 0;
await page.selectOption("#compare", "week");
await settled();
const diffTotals = () => page.evaluate(() => window.stackhouse.flame.totals);
out.week = { url: params(), request: lastRequest("/api/v1/diff"), totals: await diffTotals() };
await page.selectOption("#compare", "label");
await settled();
await page.selectOption("#compare-label", plan.label);
await settled();
await page.selectOption("#compare-value", plan.labelFirst);
await page.waitForTimeout(200);
out.labelFirst = { url: params(), message: await page.$eval("#compare-message", (e) => e.textContent) };
await page.selectOption("#compare-value", plan.labelValue);
await settled();
out.label = {
  url: params(), request: lastRequest("/api/v1/diff"), totals: await diffTotals(),
  message: await page.$eval("#compare-message", (e) => e.textContent),
};
await shot("reading-diff-presets");
await page.reload();
await settled();
out.labelReloaded = {
  compare: await page.$eval("#compare", (s) => s.value),
  label: await page.$eval("#compare-label", (s) => s.value),
  value: await page.$eval("#compare-value", (s) => s.value),
  totals: await diffTotals(),
};

out.pageErrors = pageErrors;
await browser.close();
process.stdout.write(JSON.stringify(out));
