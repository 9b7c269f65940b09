// A flame chart per lane (thread, or any label): time on x, each sample's stack drawn as a
// column at its timestamp, callers on top. Drawn on a canvas with level of detail: columns
// snap to whole pixels, adjacent samples whose stacks share a prefix are merged into one
// rectangle per frame, and a pixel already drawn at a depth keeps its first frame, so
// 100,000 samples cost about as much as the pixels they cover. Frames are written straight
// into the canvas's pixels (tens of thousands of 2D-context rectangles per zoom step would
// take longer than a frame); text and the axis go on top.

import { TIME_UNITS, frameColor } from "./format.js";
import { formatDateTime, tickLabel, tickStep } from "./time.js";

const ROW = 14;
const LABEL = 16;
const AXIS = 20;
const GAP = 6;
/** Deeper frames are cut: a lane stays readable beside the others. */
const MAX_DEPTH = 32;
const FONT = "11px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace";
const MIN_TEXT_WIDTH = 30;

/** What the lane of an event is called under `key` ("thread" or a label name). */
function laneOf(event, key, series) {
  if (key === "thread") return event.thread ?? "";
  return event.attributes?.[key] ?? series[event.series_id]?.[key] ?? "";
}

/**
 * How long a sample stands for, in nanoseconds, when its value is a time (off-CPU or wall
 * time); null otherwise (counts, bytes: events carry no sampling period to scale by).
 */
function durationOf(value, info) {
  return info.unit in TIME_UNITS ? value * TIME_UNITS[info.unit] : null;
}

export class Timeline {
  /** `onFrame({name, frames, from, to})` is told of a click on a frame. */
  constructor(canvas, tooltip, onFrame) {
    this.canvas = canvas;
    this.tooltip = tooltip;
    this.onFrame = onFrame;
    this.lanes = [];
    this.view = null;
    this.drag = null;
    canvas.addEventListener("wheel", (event) => {
      if (!this.view) return;
      event.preventDefault();
      this.zoom(event.deltaY < 0 ? 1 / 1.25 : 1.25, this.timeAtX(this.xIn(event)));
    }, { passive: false });
    canvas.addEventListener("mousedown", (event) => {
      if (!this.view) return;
      this.drag = { x: event.clientX, view: [...this.view], moved: false };
      event.preventDefault();
    });
    window.addEventListener("mousemove", (event) => {
      if (this.drag) {
        const dx = event.clientX - this.drag.x;
        if (Math.abs(dx) >= 3) this.drag.moved = true;
        if (this.drag.moved) {
          const [v0, v1] = this.drag.view;
          this.setView(v0 - (dx / this.width) * (v1 - v0), v1 - (dx / this.width) * (v1 - v0));
        }
      } else if (event.target === canvas) {
        this.hover(event);
      }
    });
    window.addEventListener("mouseup", (event) => {
      const drag = this.drag;
      this.drag = null;
      if (drag && !drag.moved && event.target === canvas) this.click(event);
    });
    canvas.addEventListener("mouseleave", () => (this.tooltip.hidden = true));
    canvas.addEventListener("keydown", (event) => this.key(event));
    new ResizeObserver(() => this.draw()).observe(canvas.parentElement);
  }

  /**
   * Shows events pages of the API (`events`, `stacks`, `series` each) with `info` (the
   * unit and period), one lane per value of `laneKey`, over `[from, to]` in unix nanoseconds.
   */
  show(pages, info, laneKey, from, to) {
    const started = performance.now();
    this.info = info;
    // Frame names and stack prefixes interned: a prefix id stands for the whole path down
    // to a frame, so "same frame under the same callers" is one integer comparison.
    const names = [];
    const nameIds = new Map();
    const prefixIds = new Map();
    this.prefixName = [];
    this.prefixParent = [];
    const paths = new Map();
    const pathOf = (stacks, id) => {
      let path = paths.get(id);
      if (path) return path;
      const frames = stacks[id] || [];
      path = new Int32Array(Math.min(frames.length, MAX_DEPTH));
      let parent = -1;
      for (let d = 0; d < path.length; d++) {
        let nameId = nameIds.get(frames[d]);
        if (nameId === undefined) {
          nameId = names.length;
          names.push(frames[d]);
          nameIds.set(frames[d], nameId);
        }
        const key = `${parent},${nameId}`;
        let prefix = prefixIds.get(key);
        if (prefix === undefined) {
          prefix = this.prefixName.length;
          this.prefixName.push(nameId);
          this.prefixParent.push(parent);
          prefixIds.set(key, prefix);
        }
        path[d] = prefix;
        parent = prefix;
      }
      paths.set(id, path);
      return path;
    };
    const byLane = new Map();
    for (const page of pages) {
      for (const event of page.events) {
        const name = laneOf(event, laneKey, page.series);
        let lane = byLane.get(name);
        if (!lane) byLane.set(name, (lane = { name, times: [], values: [], paths: [], depth: 0 }));
        const path = pathOf(page.stacks, event.stack_id);
        lane.times.push(event.timestamp);
        lane.values.push(event.value);
        lane.paths.push(path);
        if (path.length > lane.depth) lane.depth = path.length;
      }
    }
    this.names = names;
    // Pixel values (little-endian RGBA) of each frame's color.
    this.colors = names.map((name) => {
      const hex = parseInt(frameColor(name).slice(1), 16);
      return (0xff000000 | ((hex & 0xff) << 16) | (hex & 0xff00) | (hex >> 16)) >>> 0;
    });
    this.lanes = [...byLane.values()].sort((a, b) => (a.name === "") - (b.name === "") || a.name.localeCompare(b.name));
    let y = AXIS;
    for (const lane of this.lanes) {
      lane.times = Float64Array.from(lane.times);
      lane.ends = this.ends(lane);
      lane.y = y;
      lane.height = LABEL + Math.max(lane.depth, 1) * ROW;
      y += lane.height + GAP;
    }
    this.height = y;
    this.range = [from, to];
    this.view = [from, to];
    this.count = this.lanes.reduce((n, lane) => n + lane.times.length, 0);
    this.draw();
    this.firstPaintMs = performance.now() - started;
    this.canvas.dataset.firstPaintMs = this.firstPaintMs.toFixed(1);
  }

  /**
   * Where each sample's column ends: after the time it stands for (or the lane's median
   * gap when its value is not a time), and never past the next sample.
   */
  ends(lane) {
    const { times, values } = lane;
    const n = times.length;
    const gaps = [];
    for (let i = 1; i < n; i++) if (times[i] > times[i - 1]) gaps.push(times[i] - times[i - 1]);
    gaps.sort((a, b) => a - b);
    const typical = gaps.length ? gaps[gaps.length >> 1] : 1e9;
    const ends = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      const length = durationOf(values[i], this.info) ?? typical;
      // Samples at the same instant share its column; the next later one bounds it.
      let next = i + 1;
      while (next < n && times[next] === times[i]) next++;
      ends[i] = next < n ? Math.min(times[i] + length, times[next]) : times[i] + length;
    }
    return ends;
  }

  clear() {
    this.lanes = [];
    this.view = null;
    this.draw();
  }

  get width() {
    return this.canvas.parentElement.clientWidth;
  }

  xAt(time) {
    const [v0, v1] = this.view;
    return ((time - v0) / (v1 - v0)) * this.width;
  }

  timeAtX(x) {
    const [v0, v1] = this.view;
    return v0 + (x / this.width) * (v1 - v0);
  }

  xIn(event) {
    return event.clientX - this.canvas.getBoundingClientRect().left;
  }

  /** Shows `[from, to]`, kept inside the data's range and at least a microsecond long. */
  setView(from, to) {
    const [r0, r1] = this.range;
    let span = Math.min(Math.max(to - from, 1e3), r1 - r0);
    let start = Math.max(r0, Math.min(from, r1 - span));
    this.view = [start, start + span];
    this.draw();
  }

  /** Zooms by `factor` (< 1 zooms in) around `at` (the middle when absent). */
  zoom(factor, at) {
    const [v0, v1] = this.view;
    const center = at ?? (v0 + v1) / 2;
    const started = performance.now();
    this.setView(center - (center - v0) * factor, center + (v1 - center) * factor);
    this.zoomMs = performance.now() - started;
    this.canvas.dataset.zoomMs = this.zoomMs.toFixed(1);
  }

  pan(fraction) {
    const [v0, v1] = this.view;
    this.setView(v0 + fraction * (v1 - v0), v1 + fraction * (v1 - v0));
  }

  reset() {
    if (this.range) this.setView(...this.range);
  }

  key(event) {
    if (!this.view) return;
    const actions = {
      "+": () => this.zoom(1 / 1.5), "=": () => this.zoom(1 / 1.5), "-": () => this.zoom(1.5),
      ArrowLeft: () => this.pan(-0.1), ArrowRight: () => this.pan(0.1), "0": () => this.reset(), Home: () => this.reset(),
    };
    const action = actions[event.key];
    if (action) {
      event.preventDefault();
      action();
    }
  }

  draw() {
    const canvas = this.canvas;
    const width = this.width;
    const height = this.view ? this.height : 40;
    const ratio = window.devicePixelRatio || 1;
    const started = performance.now();
    if (canvas.width !== Math.round(width * ratio) || canvas.height !== Math.round(height * ratio)) {
      canvas.width = Math.round(width * ratio);
      canvas.height = Math.round(height * ratio);
      canvas.style.width = `${width}px`;
      canvas.style.height = `${height}px`;
    }
    const ctx = canvas.getContext("2d");
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    // Hidden (another view is shown): drawn again when it shows.
    if (!this.view || !canvas.width || !canvas.height) return;
    if (this.image?.width !== canvas.width || this.image?.height !== canvas.height) {
      this.image = ctx.createImageData(canvas.width, canvas.height);
      this.pixels = new Uint32Array(this.image.data.buffer);
    } else {
      this.pixels.fill(0);
    }
    this.ratio = ratio;
    const labels = [];
    let rects = 0;
    for (const lane of this.lanes) rects += this.drawLane(lane, width, labels);
    ctx.putImageData(this.image, 0, 0);
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.font = FONT;
    ctx.textBaseline = "middle";
    this.drawAxis(ctx, width);
    ctx.fillStyle = "#444";
    for (const lane of this.lanes) ctx.fillText(`${lane.name || "(none)"} · ${lane.times.length} samples`, 2, lane.y + LABEL / 2);
    ctx.fillStyle = "#1d1d1d";
    const charWidth = ctx.measureText("m").width;
    for (const [nameId, x, y, w] of labels) {
      const name = this.names[nameId];
      const fits = Math.floor((w - 6) / charWidth);
      ctx.fillText(name.length <= fits ? name : `${name.slice(0, Math.max(fits - 1, 0))}…`, x + 3, y + ROW / 2);
    }
    this.drawMs = performance.now() - started;
    canvas.dataset.rects = String(rects);
    canvas.dataset.samples = String(this.count);
    canvas.dataset.view = `${Math.round(this.view[0])},${Math.round(this.view[1])}`;
  }

  drawAxis(ctx, width) {
    const [v0, v1] = this.view;
    const span = v1 - v0;
    const step = tickStep(span, width, 110);
    ctx.fillStyle = "#666";
    ctx.strokeStyle = "#eee";
    ctx.textAlign = "center";
    // Grid lines behind the frames already painted.
    ctx.globalCompositeOperation = "destination-over";
    for (let t = Math.ceil(v0 / step) * step; t <= v1; t += step) {
      const x = Math.round(this.xAt(t)) + 0.5;
      ctx.beginPath();
      ctx.moveTo(x, AXIS - 4);
      ctx.lineTo(x, this.height);
      ctx.stroke();
    }
    ctx.globalCompositeOperation = "source-over";
    for (let t = Math.ceil(v0 / step) * step; t <= v1; t += step) {
      const x = Math.round(this.xAt(t)) + 0.5;
      const label = tickLabel(t, span);
      const half = ctx.measureText(label).width / 2;
      ctx.fillText(label, Math.min(Math.max(x, half), width - half), AXIS / 2 - 2);
    }
    ctx.textAlign = "left";
  }

  /** Paints one lane's frames into the pixels, adds their labels; answers how many rectangles it painted. */
  drawLane(lane, width, labels) {
    const { times, ends, paths } = lane;
    const { pixels, ratio } = this;
    const stride = this.image.width;
    const top = lane.y + LABEL;
    // The first sample whose column may reach into view.
    let lo = 0;
    let hi = times.length;
    const [v0, v1] = this.view;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (times[mid] < v0 - 60e9) lo = mid + 1;
      else hi = mid;
    }
    const depth = Math.max(lane.depth, 1);
    const runNode = new Int32Array(depth).fill(-1);
    const runX0 = new Float64Array(depth);
    const runX1 = new Float64Array(depth);
    let rects = 0;
    // Pixels per nanosecond, read once: the width getter asks the layout.
    const scale = width / (v1 - v0);
    const flush = (d) => {
      const node = runNode[d];
      if (node < 0) return;
      const x0 = runX0[d];
      const w = runX1[d] - x0;
      const nameId = this.prefixName[node];
      const color = this.colors[nameId];
      // A one-pixel gap between wide frames, so neighbours read apart.
      const px0 = Math.round(x0 * ratio);
      const px1 = Math.round((w > 3 ? x0 + w - 1 : x0 + w) * ratio);
      const py0 = Math.round((top + d * ROW) * ratio);
      const py1 = Math.round((top + (d + 1) * ROW - 1) * ratio);
      if (px1 - px0 <= 8) {
        // Most frames are a pixel or two wide at low zoom: plain stores beat fill()'s call.
        for (let row = py0 * stride; row < py1 * stride; row += stride) {
          for (let px = px0; px < px1; px++) pixels[row + px] = color;
        }
      } else {
        for (let py = py0; py < py1; py++) pixels.fill(color, py * stride + px0, py * stride + px1);
      }
      if (w >= MIN_TEXT_WIDTH) labels.push([nameId, x0, top + d * ROW, w]);
      rects++;
      runNode[d] = -1;
    };
    for (let i = lo; i < times.length && times[i] <= v1; i++) {
      if (ends[i] < v0) continue;
      const x0 = Math.max(Math.floor((times[i] - v0) * scale), 0);
      const x1 = Math.max(Math.min(Math.ceil((ends[i] - v0) * scale), width), x0 + 1);
      const path = paths[i];
      for (let d = 0; d < depth; d++) {
        const node = d < path.length ? path[d] : -1;
        if (runNode[d] >= 0) {
          // Same prefix touching the run: one rectangle at this zoom.
          if (node === runNode[d] && x0 <= runX1[d]) {
            if (x1 > runX1[d]) runX1[d] = x1;
            continue;
          }
          // Inside pixels the run already covers: not visible at this zoom.
          if (x1 <= runX1[d]) continue;
          if (node < 0 && x0 < runX1[d]) continue;
        }
        const start = runNode[d] >= 0 ? Math.max(x0, runX1[d]) : x0;
        flush(d);
        if (node >= 0) {
          runNode[d] = node;
          runX0[d] = start;
          runX1[d] = x1;
        }
      }
    }
    for (let d = 0; d < depth; d++) flush(d);
    return rects;
  }

  /** The lane, sample and depth under a point in CSS pixels of the canvas; null off the samples. */
  hit(x, y) {
    const lane = this.lanes.find((l) => y >= l.y + LABEL && y < l.y + l.height);
    if (!lane) return null;
    const depth = Math.floor((y - lane.y - LABEL) / ROW);
    const time = this.timeAtX(x);
    const pixel = (this.view[1] - this.view[0]) / this.width;
    // The last sample starting at or before the point (within a pixel) whose column reaches it.
    let lo = 0;
    let hi = lane.times.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (lane.times[mid] <= time + pixel) lo = mid + 1;
      else hi = mid;
    }
    for (let i = lo - 1; i >= 0 && lane.times[i] >= time - 60e9; i--) {
      if (lane.ends[i] + pixel >= time) {
        const path = lane.paths[i];
        return { lane, index: i, depth, frames: this.framesOf(path), onFrame: depth < path.length };
      }
    }
    return null;
  }

  framesOf(path) {
    return [...path].map((prefix) => this.names[this.prefixName[prefix]]);
  }

  /** The stack and time at an instant of a lane, as the page shows them (for tests and tools). */
  sampleAt(laneName, time) {
    const lane = this.lanes.find((l) => l.name === laneName);
    if (!lane) return null;
    let i = lane.times.findLastIndex((t) => t <= time);
    if (i < 0 || lane.ends[i] < time) return null;
    return { time: lane.times[i], frames: this.framesOf(lane.paths[i]), value: lane.values[i] };
  }

  /** A lane's box in CSS pixels of the canvas, for tests and tools. */
  laneBox(name) {
    const lane = this.lanes.find((l) => l.name === name);
    return lane ? { y: lane.y + LABEL, height: lane.height - LABEL, depth: lane.depth } : null;
  }

  hover(event) {
    const rect = this.canvas.getBoundingClientRect();
    const hit = this.view ? this.hit(event.clientX - rect.left, event.clientY - rect.top) : null;
    this.canvas.style.cursor = hit?.onFrame ? "pointer" : "default";
    if (!hit) {
      this.tooltip.hidden = true;
      return;
    }
    const { lane, index, depth, frames } = hit;
    const title = document.createElement("div");
    title.className = "tooltip-title";
    title.textContent = `${lane.name || "(none)"} · ${formatDateTime(lane.times[index])}`;
    const lines = frames.map((name, d) => {
      const div = document.createElement("div");
      div.className = d === depth ? "frame current" : "frame";
      div.textContent = `${"  ".repeat(d)}${name}`;
      return div;
    });
    if (!frames.length) lines.push(Object.assign(document.createElement("div"), { textContent: "(empty stack)" }));
    this.tooltip.replaceChildren(title, ...lines);
    this.tooltip.hidden = false;
    const box = this.tooltip.getBoundingClientRect();
    this.tooltip.style.left = `${Math.max(Math.min(event.clientX + 14, window.innerWidth - box.width - 4), 4)}px`;
    const below = event.clientY + 14 + box.height > window.innerHeight;
    this.tooltip.style.top = `${Math.max(below ? event.clientY - box.height - 14 : event.clientY + 14, 4)}px`;
  }

  click(event) {
    const rect = this.canvas.getBoundingClientRect();
    const hit = this.hit(event.clientX - rect.left, event.clientY - rect.top);
    if (!hit?.onFrame) return;
    const frames = hit.frames.slice(0, hit.depth + 1);
    this.onFrame({ name: frames[frames.length - 1], frames, from: this.view[0], to: this.view[1] });
  }
}
