// Drives the web UI's second round of views in headless Chromium, in the time zone
// `plan.timezone`: times typed as local date-times, the timeline (hover and click on a
// lane at an instant), the sandwich, exemplar dots, keyboard reach, and the timeline's
// render time for `plan.perfSamples` samples. Prints what the page showed as JSON; the
// Rust test (`web_ui.rs`) compares it with values computed from the input.
//
// Usage: node views.mjs < plan.json

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { session } from "./session.mjs";

const plan = JSON.parse(readFileSync(0, "utf8"));
const { browser, page, pageErrors, requests, settled, open } = await session(plan, { timezoneId: plan.timezone });

const out = {};
const shot = (name) => page.screenshot({ path: join(plan.screenshots, `${name}.png`), fullPage: true });

const params = () => Object.fromEntries(new URL(page.url()).searchParams);
/** The query of the last request to `path`, as the server got it. */
const lastRequest = (path) => {
  const url = requests.map((u) => new URL(u)).filter((u) => u.pathname === path).at(-1);
  return url ? Object.fromEntries(url.searchParams) : null;
};
const flameTotal = () => page.evaluate(() => window.stackhouse.flame.info?.total);

// 1. Time: the deep link with nanoseconds, then the same range typed as local date-times.
await open(plan.single);
out.time = {
  shownFrom: await page.$eval("#from", (i) => i.value),
  shownTo: await page.$eval("#to", (i) => i.value),
  byUrl: lastRequest("/api/v1/flamegraph"),
};
await page.fill("#from", plan.typedFrom);
await page.fill("#to", plan.typedTo);
requests.length = 0;
await page.click("#run");
await settled();
out.time.typed = lastRequest("/api/v1/flamegraph");
out.time.url = params();
await page.selectOption("#zone", "utc");
out.time.utcFrom = await page.$eval("#from", (i) => i.value);
out.time.utcUrl = params();
await page.fill("#from", "now-6h");
await page.fill("#to", "now");
requests.length = 0;
await page.click("#run");
await settled();
// The range holds no profiles: the profile types asked for say what was sent.
out.time.relative = lastRequest("/api/v1/profile-types");
await page.fill("#from", "yesterday-ish");
await page.click("#run");
out.time.badError = await page.$eval("#error", (e) => (e.hidden ? "" : e.textContent));

// 2. Timeline: one lane per thread; hover a lane at an instant, then click a frame there.
await open({ ...plan.single, view: "timeline" });
await page.waitForFunction(() => window.stackhouse.timeline.lanes.length > 0, null, { timeout: 30_000 });
out.timeline = {
  lanes: await page.evaluate(() => window.stackhouse.timeline.lanes.map((l) => [l.name, l.times.length])),
  title: await page.$eval("#timeline-title", (e) => e.textContent),
};
await shot("10-timeline");
const [t0, t1] = plan.hover.window;
await page.evaluate(([a, b]) => window.stackhouse.timeline.setView(a, b), [t0, t1]);
const box = await page.evaluate(({ lane, time }) => {
  const { timeline } = window.stackhouse;
  const rect = document.getElementById("timeline").getBoundingClientRect();
  const lb = timeline.laneBox(lane);
  return lb && { x: rect.left + timeline.xAt(time) + 2, y: rect.top + lb.y, height: lb.height };
}, plan.hover);
out.timeline.laneFound = Boolean(box);
if (box) {
  await page.mouse.move(box.x, box.y + 7);
  await page.waitForTimeout(50);
  out.timeline.tooltipTitle = await page.$eval("#tooltip", (t) => t.querySelector(".tooltip-title")?.textContent ?? "");
  out.timeline.tooltipFrames = await page.$$eval("#tooltip .frame", (lines) => lines.map((l) => l.textContent.trim()));
  await shot("11-timeline-hover");
  // Keyboard zoom on the focused canvas.
  await page.focus("#timeline");
  const before = await page.$eval("#timeline", (c) => c.dataset.view);
  await page.keyboard.press("-");
  out.timeline.keyboardZoomed = before !== (await page.$eval("#timeline", (c) => c.dataset.view));
  await page.evaluate(([a, b]) => window.stackhouse.timeline.setView(a, b), [t0, t1]);
  // Click the second frame of that stack: the flame graph zoomed to it.
  await page.mouse.click(box.x, box.y + 14 + 7);
  await settled();
  out.timeline.clicked = { url: params(), zoom: await page.$eval("#flamegraph", (c) => c.dataset.zoom) };
}

// 2a. Lanes by another label.
await open({ ...plan.single, view: "timeline", lane: "host.name" });
out.lanesByHost = await page.evaluate(() => window.stackhouse.timeline.lanes.map((l) => [l.name, l.times.length]));

// 2b. Over the sample budget: what was left out, and narrowing the range to what was read.
await open({ ...plan.single, view: "timeline", events: String(plan.budget) });
const leftOut = () =>
  page.$eval("#timeline-left-out", (e) => ({
    shown: !document.getElementById("timeline-status").hidden,
    text: e.textContent,
    leftOut: e.dataset.leftOut,
    loaded: e.dataset.loaded,
  }));
out.budget = { first: await leftOut() };
await shot("15-timeline-left-out");
await page.click("#timeline-narrow");
await settled();
out.budget.narrowed = {
  url: params(),
  status: await leftOut(),
  samples: await page.evaluate(() => window.stackhouse.timeline.count),
};

// 3. Sandwich from a link, and picking another function with a row's ⇅ button.
await open({ ...plan.single, view: "sandwich", function: plan.sandwich });
const tree = (name) =>
  page.evaluate((name) => {
    const root = window.stackhouse[name].root;
    return root && { name: root.name, total: root.total, self: root.self, children: root.children.map((c) => [c.name, c.total]) };
  }, name);
out.sandwich = { callers: await tree("callers"), callees: await tree("callees"), title: await page.$eval("#sandwich-title", (e) => e.textContent) };
await shot("12-sandwich");
const row = page.locator("#top-table tbody tr", { has: page.locator(`td.name[title="${plan.sandwichPick}"]`) });
await row.locator(".sandwich-button").click();
await settled();
out.sandwich.picked = { url: params(), callees: await tree("callees") };

// 4. Keyboard: Tab from the top reaches every control before the table, with a visible focus.
await open(plan.single);
await page.click("body", { position: { x: 1, y: 990 } }).catch(() => {});
await page.evaluate(() => document.activeElement?.blur());
const reached = new Set();
let outline = null;
for (let i = 0; i < 120; i++) {
  await page.keyboard.press("Tab");
  const focused = await page.evaluate(() => {
    const el = document.activeElement;
    if (!el || el === document.body) return null;
    const style = getComputedStyle(el);
    return { key: el.id || `${el.tagName.toLowerCase()}:${el.textContent.trim().slice(0, 30)}`, row: el.tagName === "TR", outline: `${style.outlineStyle} ${style.outlineWidth}` };
  });
  if (!focused) continue;
  reached.add(focused.key);
  if (focused.key === "run") outline = focused.outline;
  if (focused.row) break;
}
out.keyboard = {
  reached: [...reached],
  controls: await page.evaluate(() => {
    const table = document.getElementById("top-table");
    return [...document.querySelectorAll("button, input, select, [tabindex='0']")]
      .filter((el) => el.offsetParent !== null && !el.disabled && el.type !== "radio" && el.tabIndex >= 0)
      .filter((el) => el.compareDocumentPosition(table) & Node.DOCUMENT_POSITION_FOLLOWING)
      .map((el) => el.id || `${el.tagName.toLowerCase()}:${el.textContent.trim().slice(0, 30)}`);
  }),
  runOutline: outline,
  rowLabels: await page.$$eval("#top-table tbody tr", (rows) => rows.slice(0, 5).map((r) => r.getAttribute("aria-label"))),
  flameLabel: await page.$eval("#flamegraph", (c) => [c.getAttribute("aria-label"), c.getAttribute("aria-describedby")]),
};

// 5. Exemplars: dots on the chart; clicking one opens that profile's flame graph.
await open(plan.single);
await page.waitForFunction(() => window.stackhouse.chart.exemplars.length > 0, null, { timeout: 30_000 }).catch(() => {});
const dots = await page.evaluate(() => window.stackhouse.chart.exemplarDots());
out.exemplars = { dots: dots.map((d) => ({ profileId: d.profileId, time: d.time, value: d.value })) };
await shot("13-exemplars");
if (dots.length > 1) {
  // By keyboard: the second dot, then Enter.
  await page.focus("#chart");
  await page.keyboard.press("ArrowRight");
  await page.keyboard.press("ArrowRight");
  out.exemplars.announced = await page.$eval("#chart-status", (e) => e.textContent);
  await page.keyboard.press("Enter");
  await settled();
  out.exemplars.byKeyboard = { url: params(), total: await flameTotal() };
  await open(plan.single);
  await page.waitForFunction(() => window.stackhouse.chart.exemplars.length > 0, null, { timeout: 30_000 }).catch(() => {});
}
if (dots.length) {
  const dot = dots[0];
  const chartBox = await page.$eval("#chart", (c) => {
    const r = c.getBoundingClientRect();
    return { x: r.left, y: r.top };
  });
  await page.mouse.click(chartBox.x + dot.x, chartBox.y + dot.y);
  await settled();
  out.exemplars.clicked = { url: params(), total: await flameTotal(), chips: await page.$eval("#lookup-active", (e) => e.textContent) };
}

// 6. Render time of the timeline for many samples: pages built here in the API's shape,
// shown by the page's own Timeline.
await open({ ...plan.single, view: "timeline" });
out.perf = await page.evaluate((n) => {
  const { timeline } = window.stackhouse;
  const frames = ["main", "run", "loop", "dispatch", "handle", "parse", "decode", "compute", "hash", "encode", "write", "flush"];
  const stacks = {};
  for (let s = 0; s < 64; s++) {
    const depth = 4 + (s % 9);
    stacks[`s${s}`] = Array.from({ length: depth }, (_, d) => (d < 2 ? frames[d] : `${frames[(s * 7 + d * 3) % frames.length]}_${d}`));
  }
  const from = 1_700_000_000e9;
  const span = 600e9;
  const events = [];
  for (let i = 0; i < n; i++) {
    events.push({
      timestamp: from + Math.floor((i / n) * span),
      value: 1,
      stack_id: `s${(i * 2654435761) % 64 >>> 0}`,
      thread: `worker-${i % 8}`,
      attributes: {},
      series_id: "1",
    });
  }
  const page = { unit: "count", events, stacks, series: { 1: { "service.name": "perf" } } };
  timeline.show([page], page, "thread", from, from + span);
  const firstPaint = timeline.firstPaintMs;
  const zooms = [];
  for (let k = 0; k < 10; k++) {
    timeline.zoom(k < 5 ? 0.8 : 1.25);
    zooms.push(timeline.zoomMs);
  }
  return {
    samples: timeline.count,
    firstPaintMs: firstPaint,
    zoomMs: zooms,
    rects: Number(document.getElementById("timeline").dataset.rects),
  };
}, plan.perfSamples);

await shot("14-timeline-100k");

out.pageErrors = pageErrors;
await browser.close();
process.stdout.write(JSON.stringify(out));
