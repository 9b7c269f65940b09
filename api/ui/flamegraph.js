// A flame graph on a canvas: the root on top, callees below, each frame as wide as its
// share. Click zooms to a frame, search dims every frame that does not match, the tooltip
// gives exact values in the profile's unit. The same drawing serves a diff, with widths
// from both sides' shares and colors from how the share changed, and, upside down (the
// root at the bottom), a sandwich view's callers.

import { diffColor, exact, formatValue, frameColor, percent, sampledTime } from "./format.js";

const ROW = 18;
const FONT = "12px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace";
/** Frames narrower than this many pixels are not drawn, nor anything below them. */
const MIN_WIDTH = 0.3;
const MIN_TEXT_WIDTH = 24;
const DIMMED = "#e3e3e3";

/** The API's tree as drawn: each node knows its parent and its drawing weight. */
function singleTree(node, parent = null) {
  const out = { name: node.name, self: node.self, total: node.total, weight: node.total, parent, children: [] };
  out.children = (node.children || []).map((child) => singleTree(child, out));
  return out;
}

/** Widths average the two sides' shares, so a side with fewer samples still shows. */
function diffTree(node, totals, parent = null) {
  const share = (value, total) => (total ? value / total : 0);
  const out = {
    name: node.name,
    baseline: node.baseline_total,
    comparison: node.comparison_total,
    baselineSelf: node.baseline_self,
    comparisonSelf: node.comparison_self,
    baselineShare: share(node.baseline_total, totals.baseline),
    comparisonShare: share(node.comparison_total, totals.comparison),
    parent,
    children: [],
  };
  out.weight = (out.baselineShare + out.comparisonShare) / 2;
  out.children = (node.children || []).map((child) => diffTree(child, totals, out));
  return out;
}

/** `text` as typed in the search box: `/re/` is a regular expression, else a substring. */
export function matcher(text) {
  const trimmed = text.trim();
  if (!trimmed) return null;
  const regex = /^\/(.+)\/([a-z]*)$/.exec(trimmed);
  if (regex) {
    try {
      const re = new RegExp(regex[1], regex[2].includes("i") ? "i" : "");
      return (name) => re.test(name);
    } catch {
      // Half-typed expressions fall through to a literal search.
    }
  }
  const needle = trimmed.toLowerCase();
  return (name) => name.toLowerCase().includes(needle);
}

export class FlameGraph {
  /**
   * `onZoom(node)` is told of every zoom and reset (`null`); `inverted` draws the root at
   * the bottom; `onMenu(node, x, y)` (if given) opens a frame's menu at client coordinates,
   * from a right-click or, on the focused canvas, the context-menu key, Shift+F10 or `m`
   * for the frame zoomed to.
   */
  constructor(canvas, tooltip, onZoom, { inverted = false, onMenu = null } = {}) {
    this.canvas = canvas;
    this.inverted = inverted;
    this.onMenu = onMenu;
    this.tooltip = tooltip;
    this.onZoom = onZoom;
    this.root = null;
    this.zoomed = null;
    this.match = null;
    this.rows = [];
    canvas.addEventListener("mousemove", (event) => this.hover(event));
    canvas.addEventListener("mouseleave", () => (this.tooltip.hidden = true));
    canvas.addEventListener("click", (event) => {
      const frame = this.frameAt(event);
      if (frame) this.zoomTo(frame.node);
    });
    canvas.addEventListener("contextmenu", (event) => {
      const frame = this.onMenu && this.frameAt(event);
      if (!frame || frame.node === this.root) return;
      event.preventDefault();
      this.onMenu(frame.node, event.clientX, event.clientY);
    });
    canvas.addEventListener("keydown", (event) => this.key(event));
    new ResizeObserver(() => this.draw()).observe(canvas.parentElement);
  }

  /** Shows a flamegraph (`mode` "single") or diff (`mode` "diff") answer of the API. */
  show(data, mode) {
    this.info = data;
    this.mode = mode;
    if (mode === "diff") {
      this.totals = { baseline: data.baseline_total, comparison: data.comparison_total };
      this.root = diffTree(data.root, this.totals);
    } else {
      this.root = singleTree(data.root);
    }
    this.zoomed = null;
    this.draw();
  }

  clear() {
    this.root = null;
    this.zoomed = null;
    this.draw();
  }

  zoomTo(node) {
    this.zoomed = node === this.root ? null : node;
    this.draw();
    this.onZoom(this.zoomed);
  }

  reset() {
    if (this.root) this.zoomTo(this.root);
  }

  /**
   * Keys on the focused canvas: Escape resets the zoom; ↓ zooms into the widest callee,
   * ↑ to the caller, ← and → to the neighbouring frames of the same caller; the menu keys
   * open the zoomed frame's menu.
   */
  key(event) {
    if (event.key === "Escape") return this.reset();
    if (!this.root) return;
    const node = this.zoomed || this.root;
    let next = null;
    if (event.key === "ArrowDown") {
      next = node.children.reduce((widest, c) => (!widest || c.weight > widest.weight ? c : widest), null);
    } else if (event.key === "ArrowUp") {
      next = node.parent;
    } else if ((event.key === "ArrowLeft" || event.key === "ArrowRight") && node.parent) {
      const siblings = node.parent.children;
      next = siblings[siblings.indexOf(node) + (event.key === "ArrowLeft" ? -1 : 1)] || null;
    } else if (this.onMenu && this.zoomed && (event.key === "ContextMenu" || event.key === "m" || (event.key === "F10" && event.shiftKey))) {
      event.preventDefault();
      const box = this.canvas.getBoundingClientRect();
      const frame = this.rows.flat().find((f) => f.node === this.zoomed);
      this.onMenu(this.zoomed, box.left + 16, box.top + (frame ? this.rowY(frame.depth) + ROW : 0));
      return;
    }
    if (next) {
      event.preventDefault();
      this.zoomTo(next);
    }
  }

  /** Zooms to the frame at the end of `names` (caller first, from the root's children). */
  zoomToPath(names) {
    let node = this.root;
    for (const name of names) {
      node = node?.children.find((child) => child.name === name);
    }
    if (node) this.zoomTo(node);
    return Boolean(node);
  }

  /** The top of a row in CSS pixels: depth 0 on top, or at the bottom when inverted. */
  rowY(depth) {
    return (this.inverted ? this.rows.length - 1 - depth : depth) * ROW;
  }

  /** Highlights frames whose name matches; answers what matched. */
  search(text) {
    this.match = matcher(text);
    this.draw();
    if (!this.match || !this.root) return null;
    let frames = 0;
    let value = 0;
    const walk = (node, counted) => {
      const hit = node !== this.root && this.match(node.name);
      if (hit) frames++;
      // A match below a match is already inside its total.
      if (hit && !counted) value += this.mode === "diff" ? node.comparison : node.total;
      node.children.forEach((child) => walk(child, counted || hit));
    };
    walk(this.root, false);
    return { frames, value };
  }

  /** The frames drawn now, in CSS pixels: for tests and tools. */
  frames() {
    return this.rows.flat().map((f) => ({ name: f.node.name, x: f.x, y: this.rowY(f.depth), width: f.width, height: ROW }));
  }

  layout(width) {
    const frames = [];
    const zoom = this.zoomed || this.root;
    const path = [];
    for (let node = zoom; node; node = node.parent) path.unshift(node);
    path.slice(0, -1).forEach((node, depth) => frames.push({ node, x: 0, width, depth, ancestor: true }));
    const scale = zoom.weight > 0 ? width / zoom.weight : 0;
    const pending = [[zoom, 0, path.length - 1]];
    while (pending.length) {
      const [node, x, depth] = pending.pop();
      const w = node.weight * scale;
      if (w < MIN_WIDTH) continue;
      frames.push({ node, x, width: w, depth });
      let childX = x;
      for (const child of node.children) {
        pending.push([child, childX, depth + 1]);
        childX += child.weight * scale;
      }
    }
    const rows = [];
    for (const frame of frames) (rows[frame.depth] ||= []).push(frame);
    return rows;
  }

  color(frame) {
    const node = frame.node;
    if (this.match && !this.match(node.name)) return DIMMED;
    if (this.mode === "diff") return diffColor(node.baselineShare, node.comparisonShare);
    return node === this.root ? "#c8c8c8" : frameColor(node.name);
  }

  draw() {
    const canvas = this.canvas;
    const width = canvas.parentElement.clientWidth;
    this.rows = this.root && this.root.weight > 0 ? this.layout(width) : [];
    const height = Math.max(this.rows.length, 1) * ROW;
    const ratio = window.devicePixelRatio || 1;
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(height * ratio);
    canvas.style.width = `${width}px`;
    canvas.style.height = `${height}px`;
    const ctx = canvas.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, height);
    ctx.font = FONT;
    ctx.textBaseline = "middle";
    const charWidth = ctx.measureText("m").width;
    let highlighted = 0;
    for (const frame of this.rows.flat()) {
      const y = this.rowY(frame.depth);
      const fill = this.color(frame);
      if (this.match && fill !== DIMMED) highlighted++;
      ctx.globalAlpha = frame.ancestor ? 0.6 : 1;
      ctx.fillStyle = fill;
      ctx.fillRect(frame.x, y, Math.max(frame.width - 1, 0.5), ROW - 1);
      if (frame.width >= MIN_TEXT_WIDTH) {
        const fits = Math.floor((frame.width - 6) / charWidth);
        const name = frame.node.name;
        const label = name.length <= fits ? name : `${name.slice(0, Math.max(fits - 1, 0))}…`;
        ctx.fillStyle = fill === DIMMED ? "#999" : "#1d1d1d";
        ctx.fillText(label, frame.x + 3, y + ROW / 2);
      }
    }
    ctx.globalAlpha = 1;
    canvas.dataset.frames = String(this.rows.flat().length);
    canvas.dataset.zoom = this.zoomed ? this.zoomed.name : "";
    canvas.dataset.highlighted = String(highlighted);
  }

  frameAt(event) {
    const rect = this.canvas.getBoundingClientRect();
    const x = event.clientX - rect.left;
    const index = Math.floor((event.clientY - rect.top) / ROW);
    const row = this.rows[this.inverted ? this.rows.length - 1 - index : index] || [];
    return row.find((f) => x >= f.x && x < f.x + f.width) || null;
  }

  hover(event) {
    const frame = this.frameAt(event);
    this.canvas.style.cursor = frame ? "pointer" : "default";
    if (!frame) {
      this.tooltip.hidden = true;
      return;
    }
    this.tooltip.replaceChildren(...this.describe(frame.node));
    this.tooltip.hidden = false;
    const pad = 14;
    const box = this.tooltip.getBoundingClientRect();
    const left = Math.min(event.clientX + pad, window.innerWidth - box.width - 4);
    const top = event.clientY + pad + box.height > window.innerHeight ? event.clientY - box.height - pad : event.clientY + pad;
    this.tooltip.style.left = `${Math.max(left, 4)}px`;
    this.tooltip.style.top = `${Math.max(top, 4)}px`;
  }

  /** Tooltip lines; names go in as text, never as markup. */
  describe(node) {
    const unit = this.info.unit;
    const line = (label, text) => {
      const div = document.createElement("div");
      const b = document.createElement("b");
      b.textContent = `${label} `;
      div.append(b, text);
      return div;
    };
    const title = document.createElement("div");
    title.className = "tooltip-title";
    title.textContent = node.name;
    const amount = (value, total) => {
      const time = sampledTime(value, this.info);
      return `${formatValue(value, unit)} (${percent(value, total)}${time ? `, ≈ ${time}` : ""}) · ${exact(value)}`;
    };
    if (this.mode === "diff") {
      const change = node.baselineShare ? `${((node.comparisonShare / node.baselineShare - 1) * 100).toFixed(1)}%` : "new";
      return [
        title,
        line("Baseline", amount(node.baseline, this.totals.baseline)),
        line("Comparison", amount(node.comparison, this.totals.comparison)),
        line("Share change", node.comparisonShare || node.baselineShare ? change : "none"),
      ];
    }
    return [title, line("Total", amount(node.total, this.root.total)), line("Self", amount(node.self, this.root.total))];
  }
}
