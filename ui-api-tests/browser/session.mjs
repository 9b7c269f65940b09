// What every browser script starts with: headless Chromium on one page, the page's errors
// and requests recorded, and the waits for the UI to settle after a query.

import { chromium } from "playwright-core";

/** A page of `plan.base` in a fresh browser; `contextOptions` add to the 1400×1000 viewport. */
export async function session(plan, contextOptions = {}) {
  const browser = await chromium.launch({
    executablePath: plan.chromium,
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run"],
  });
  const context = await browser.newContext({ viewport: { width: 1400, height: 1000 }, ...contextOptions });
  const page = await context.newPage();
  const pageErrors = [];
  const consoleErrors = [];
  const requests = [];
  page.on("pageerror", (error) => pageErrors.push(`${error.name}: ${error.message}`));
  page.on("console", (message) => message.type() === "error" && consoleErrors.push(message.text()));
  page.on("request", (request) => requests.push(request.url()));

  /** Waits until no query runs and the flame graph or a message is shown. */
  async function settled() {
    await page.waitForFunction(() => !document.body.classList.contains("busy") && window.stackhouse, null, { timeout: 60_000 });
    await page.waitForTimeout(150);
  }

  async function open(query) {
    await page.goto(`${plan.base}/?${new URLSearchParams(query)}`);
    await settled();
  }

  return { browser, context, page, pageErrors, consoleErrors, requests, settled, open };
}
