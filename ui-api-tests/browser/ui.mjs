// Drives the web UI in headless Chromium as a user would (open a link, click a frame, type
// a search, drag on the chart, switch to the diff view, download) and prints what the page
// showed as JSON on stdout. It asserts nothing: the Rust test compares the observations
// with values computed from the input. Screenshots go to `plan.screenshots`.
//
// Usage: node ui.mjs < plan.json

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { session } from "./session.mjs";

const plan = JSON.parse(readFileSync(0, "utf8"));
const { browser, page, pageErrors, consoleErrors, requests, settled, open } = await session(plan, { acceptDownloads: true });

const out = {};
const shot = (name) => page.screenshot({ path: join(plan.screenshots, `${name}.png`), fullPage: true });

/** Painted pixels of a canvas, and how many of them are clearly red or green. */
function pixels(selector) {
  return page.evaluate((selector) => {
    const canvas = document.querySelector(selector);
    const data = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
    let painted = 0;
    let red = 0;
    let green = 0;
    for (let i = 0; i < data.length; i += 4) {
      if (data[i + 3] === 0) continue;
      painted++;
      if (data[i] > data[i + 1] + 60 && data[i] > data[i + 2] + 60) red++;
      if (data[i + 1] > data[i] + 40 && data[i + 1] > data[i + 2] + 40) green++;
    }
    return { painted, red, green, width: canvas.width, height: canvas.height };
  }, selector);
}

const tableRows = () =>
  page.$$eval("#top-table tbody tr", (rows) => rows.map((tr) => [...tr.cells].map((td) => td.textContent)));
const flameState = () =>
  page.evaluate(() => {
    const { flame } = window.stackhouse;
    const canvas = document.getElementById("flamegraph");
    return {
      frames: Number(canvas.dataset.frames),
      zoom: canvas.dataset.zoom,
      highlighted: Number(canvas.dataset.highlighted),
      total: flame.info?.total,
      totals: flame.totals,
      rootChildren: flame.root ? flame.root.children.map((c) => c.name) : [],
      title: document.getElementById("flame-title").textContent,
      width: canvas.clientWidth,
    };
  });
const frame = (name) => page.evaluate((name) => window.stackhouse.flame.frames().find((f) => f.name === name && f.y > 0), name);
const params = () => Object.fromEntries(new URL(page.url()).searchParams);
const visibleText = (selector) => page.$eval(selector, (el) => (el.hidden ? "" : el.textContent));

// 1. A deep link: profile type, service selector and range from the URL.
await open(plan.single);
out.single = {
  flame: await flameState(),
  pixels: await pixels("#flamegraph"),
  chart: await pixels("#chart"),
  bars: Number(await page.$eval("#chart", (c) => c.dataset.bars)),
  rows: await tableRows(),
  tableSelf: await page.evaluate(() => window.stackhouse.table.sorted().map((r) => [r.name, r.self])),
  service: await page.$eval("#service", (s) => s.value),
  error: await visibleText("#error"),
};
await shot("1-flamegraph");

// 2. Tooltip and click-to-zoom on a frame.
const target = await frame(plan.zoom);
const canvasBox = await page.$eval("#flamegraph", (c) => {
  const r = c.getBoundingClientRect();
  return { x: r.left, y: r.top };
});
out.zoomBefore = target;
if (target) {
  const x = canvasBox.x + target.x + Math.min(target.width / 2, 40);
  const y = canvasBox.y + target.y + target.height / 2;
  await page.mouse.move(x, y);
  out.tooltip = await visibleText("#tooltip");
  await shot("2-tooltip");
  await page.mouse.click(x, y);
  await page.waitForTimeout(100);
  out.zoomAfter = { state: await flameState(), frame: await frame(plan.zoom), resetEnabled: await page.$eval("#reset-zoom", (b) => !b.disabled) };
  await shot("3-zoomed");
  await page.click("#reset-zoom");
  out.zoomReset = await flameState();
}

// 3. Search highlights matching frames.
await page.fill("#search", plan.search);
await page.waitForTimeout(100);
out.search = {
  state: await flameState(),
  result: await visibleText("#search-result"),
  value: await page.$eval("#search-result", (el) => el.dataset.value),
  pixels: await pixels("#flamegraph"), url: params() };
await shot("4-search");
await page.fill("#search", "");

// 4. Sorting the table by total.
await page.click('#top-table th[data-key="total"]');
out.sortedByTotal = await page.evaluate(() => window.stackhouse.table.sorted().slice(0, 3).map((r) => [r.name, r.total]));

// 5. Selector autocomplete: label names after `{`, values inside quotes.
await page.fill("#selector", "");
await page.click("#selector");
await page.keyboard.type("{serv");
await page.waitForSelector("#selector-suggestions:not([hidden])", { timeout: 5_000 }).catch(() => {});
out.nameSuggestions = await page.$$eval("#selector-suggestions li", (items) => items.map((li) => li.textContent));
await page.keyboard.press("Enter");
await page.waitForTimeout(300);
out.valueSuggestions = await page.$$eval("#selector-suggestions li", (items) => items.map((li) => li.textContent));
await page.keyboard.type("pay");
await page.waitForTimeout(300);
await page.keyboard.press("Enter");
out.completed = await page.$eval("#selector", (i) => i.value);
await page.keyboard.press("Escape");

// 6. Brush to zoom on the chart from the deep link's view.
await open(plan.single);
const chartBox = await page.$eval("#chart", (c) => {
  const r = c.getBoundingClientRect();
  return { x: r.left, y: r.top, width: r.width, height: r.height };
});
await page.mouse.move(chartBox.x + chartBox.width * 0.3, chartBox.y + chartBox.height / 2);
await page.mouse.down();
await page.mouse.move(chartBox.x + chartBox.width * 0.6, chartBox.y + chartBox.height / 2, { steps: 5 });
await page.mouse.up();
await settled();
out.brush = { url: params(), flame: await flameState() };
await shot("5-brushed");
await page.goBack();
await settled();
out.back = params();

// 7. Group by a label: a legend entry and a top-level node per value.
await open({ ...plan.single, group_by: plan.groupBy });
out.groupBy = { flame: await flameState(), legend: await page.$$eval("#chart-legend .legend-item", (items) => items.map((i) => i.textContent)) };
await shot("6-group-by");

// 8. Trace id lookup through the form.
await open(plan.single);
await page.selectOption("#lookup-kind", "trace_id");
await page.fill("#lookup-id", plan.traceId);
await page.click('#lookup button[type="submit"]');
await settled();
out.trace = { url: params(), flame: await flameState(), chips: await visibleText("#lookup-active") };

// 9. Downloads of the selection.
await open(plan.single);
for (const [format, button] of [["pprof", "#download-pprof"], ["folded", "#download-folded"]]) {
  const [download] = await Promise.all([page.waitForEvent("download"), page.click(button)]);
  const path = await download.path();
  const bytes = readFileSync(path);
  out[format] = {
    name: download.suggestedFilename(),
    size: bytes.length,
    gzip: bytes[0] === 0x1f && bytes[1] === 0x8b,
    text: format === "folded" ? bytes.toString("utf8") : gunzipSync(bytes).length,
  };
}

// 10. The diff view from a link, with both sides' ranges.
await open(plan.diff);
out.diff = { flame: await flameState(), pixels: await pixels("#flamegraph"), rows: (await tableRows()).length, url: params() };
await shot("7-diff");

// 11. Switching to the diff view from the flame graph fills both sides.
await open(plan.single);
await page.click("#tab-diff");
await settled();
out.diffFromTab = { url: params(), flame: await flameState() };

// 12. Two tenants at once from the Tenant field, grouped by tenant.
await open(plan.tenants);
out.tenants = {
  flame: await flameState(),
  tenantField: await page.inputValue("#tenant"),
  groups: await page.evaluate(() => window.stackhouse.flame.root.children.map((c) => [c.name, c.total])),
  legend: await page.$$eval("#chart-legend .legend-item", (items) => items.map((i) => i.textContent)),
};
await shot("10-tenants");

out.pageErrors = [...pageErrors];
out.consoleErrors = [...consoleErrors];

// 13. Error and empty states (these log failed requests on purpose).
await open(plan.badSelector);
out.badSelector = { error: await visibleText("#error"), flame: await flameState() };
await shot("8-error");
await open(plan.empty);
out.empty = { message: await visibleText("#flame-message"), error: await visibleText("#error") };
await shot("9-empty");
out.pageErrorsAtEnd = pageErrors;

await browser.close();
process.stdout.write(JSON.stringify(out));
