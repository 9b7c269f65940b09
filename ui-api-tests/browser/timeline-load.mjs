// Opens the timeline of a large range from the server (every sample read through
// /api/v1/events) and reports how long loading, the first paint and keyboard zoom steps
// took, and the stack the tooltip gives at `plan.hover`'s lane and instant. Prints JSON;
// the Rust test (`web_ui.rs`) compares it with the input.
//
// Usage: node timeline-load.mjs < plan.json

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { session } from "./session.mjs";

const plan = JSON.parse(readFileSync(0, "utf8"));
const { browser, page, pageErrors } = await session(plan, { timezoneId: "UTC" });

const started = Date.now();
await page.goto(`${plan.base}/?${new URLSearchParams(plan.query)}`);
await page.waitForFunction(
  () => window.stackhouse && !document.body.classList.contains("busy") && window.stackhouse.timeline.count > 0,
  null,
  { timeout: 300_000 },
);
const out = { loadMs: Date.now() - started };
out.samples = await page.evaluate(() => window.stackhouse.timeline.count);
out.lanes = await page.evaluate(() => window.stackhouse.timeline.lanes.map((l) => [l.name, l.times.length]));
out.firstPaintMs = await page.evaluate(() => window.stackhouse.timeline.firstPaintMs);
out.leftOutShown = await page.$eval("#timeline-status", (e) => !e.hidden);
await page.screenshot({ path: join(plan.screenshots, "16-timeline-100k-server.png"), fullPage: true });

// Zoom steps from the keyboard, as a user does them.
await page.focus("#timeline");
out.zoomMs = [];
for (const key of ["+", "+", "+", "+", "+", "-", "-", "-", "-", "-"]) {
  await page.keyboard.press(key);
  out.zoomMs.push(await page.evaluate(() => window.stackhouse.timeline.zoomMs));
}

// The stack at a lane and instant, through the tooltip.
const [t0, t1] = plan.hover.window;
await page.evaluate(([a, b]) => window.stackhouse.timeline.setView(a, b), [t0, t1]);
const box = await page.evaluate(({ lane, time }) => {
  const { timeline } = window.stackhouse;
  const rect = document.getElementById("timeline").getBoundingClientRect();
  const lb = timeline.laneBox(lane);
  return lb && { x: rect.left + timeline.xAt(time) + 2, y: rect.top + lb.y + 7 };
}, plan.hover);
if (box) {
  await page.mouse.move(box.x, box.y);
  await page.waitForTimeout(50);
  out.tooltipFrames = await page.$$eval("#tooltip .frame", (lines) => lines.map((l) => l.textContent.trim()));
}
out.pageErrors = pageErrors;
await browser.close();
process.stdout.write(JSON.stringify(out));
