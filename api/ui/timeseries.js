// Values over time as stacked bars, one color per group. Dragging across the chart picks a
// time range (brush to zoom); marked ranges (a diff's baseline and comparison) are shaded;
// exemplars (the largest profile of a step) are dots along the top, a click opens one.

import { SERIES_COLORS, formatValue } from "./format.js";
import { formatDateTime, tickLabel, tickStep } from "./time.js";

const PAD = { left: 64, right: 12, top: 8, bottom: 22 };
const HEIGHT = 150;
const DOT = 4;
const TICK_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800].map(
  (s) => s * 1e9,
);

/** The smallest step of a readable size (1 s, 2 s, 5 s, … 1 week) that is at least `nanos`. */
export function niceStep(nanos) {
  return TICK_STEPS.find((s) => s >= nanos) || TICK_STEPS[TICK_STEPS.length - 1];
}

/** Bars of a chart `width` pixels wide over `span` nanoseconds: at least 4 pixels each. */
export function stepFor(span, width) {
  return niceStep(span / Math.max((width - PAD.left - PAD.right) / 4, 1));
}

function niceCeiling(value) {
  if (value <= 0) return 1;
  const magnitude = 10 ** Math.floor(Math.log10(value));
  return [1, 2, 2.5, 5, 10].map((m) => m * magnitude).find((m) => m >= value);
}

export class TimeChart {
  /**
   * `onBrush(from, to)` gets a dragged range in unix nanoseconds, `onExemplar(exemplar)`
   * a clicked exemplar dot.
   */
  constructor(canvas, tooltip, onBrush, onExemplar) {
    this.canvas = canvas;
    this.tooltip = tooltip;
    this.onBrush = onBrush;
    this.onExemplar = onExemplar;
    this.data = null;
    this.marks = [];
    this.exemplars = [];
    this.drag = null;
    canvas.addEventListener("mousedown", (event) => {
      if (!this.data) return;
      this.drag = { start: this.xOf(event), end: this.xOf(event) };
      this.pressed = event;
      event.preventDefault();
    });
    window.addEventListener("mousemove", (event) => {
      if (this.drag) {
        this.drag.end = this.xOf(event);
        this.draw();
      } else if (event.target === canvas) {
        this.hover(event);
      }
    });
    window.addEventListener("mouseup", () => this.finishDrag());
    canvas.addEventListener("mouseleave", () => {
      this.hoverX = null;
      this.tooltip.hidden = true;
      this.draw();
    });
    // Keyboard: ← and → pick an exemplar dot, Enter opens it.
    canvas.addEventListener("keydown", (event) => {
      const count = this.exemplars.length;
      if (!count) return;
      if (event.key === "ArrowRight" || event.key === "ArrowLeft") {
        event.preventDefault();
        const step = event.key === "ArrowRight" ? 1 : -1;
        this.selected = this.selected == null ? (step > 0 ? 0 : count - 1) : (this.selected + step + count) % count;
        this.draw();
        this.announce();
      } else if (event.key === "Enter" && this.selected != null) {
        event.preventDefault();
        this.onExemplar(this.exemplars[this.selected]);
      }
    });
    canvas.addEventListener("blur", () => {
      this.selected = null;
      this.draw();
    });
    new ResizeObserver(() => this.draw()).observe(canvas.parentElement);
  }

  /** Says which exemplar the keyboard picked, in the live region named by the canvas's `aria-describedby`. */
  announce() {
    const region = document.getElementById(this.canvas.getAttribute("aria-describedby"));
    const e = this.exemplars[this.selected];
    if (region && e) {
      region.textContent = `exemplar ${this.selected + 1} of ${this.exemplars.length}: ${formatDateTime(e.time)}, ${e.label}; Enter opens it`;
    }
  }

  /** A timeseries answer of the API (`series` with `points` and `group`). */
  show(data) {
    this.data = data;
    this.exemplars = [];
    this.draw();
  }

  clear() {
    this.data = null;
    this.exemplars = [];
    this.draw();
  }

  /** Exemplars to draw as dots: `[{time, label, ...}]`, time in unix nanoseconds. */
  showExemplars(exemplars) {
    this.exemplars = exemplars;
    this.selected = null;
    this.draw();
  }

  /** The exemplar dots drawn now, in CSS pixels of the canvas (for tests and tools). */
  exemplarDots() {
    if (!this.data) return [];
    return this.exemplars.map((e) => ({ ...e, x: this.xAt(e.time), y: PAD.top + DOT + 1 }));
  }

  exemplarAt(event) {
    const rect = this.canvas.getBoundingClientRect();
    const [x, y] = [event.clientX - rect.left, event.clientY - rect.top];
    return this.exemplarDots().find((d) => Math.hypot(d.x - x, d.y - y) <= DOT + 2) || null;
  }

  /** Ranges to shade: `[{from, to, color}]` in unix nanoseconds. */
  mark(marks) {
    this.marks = marks;
    this.draw();
  }

  xOf(event) {
    const rect = this.canvas.getBoundingClientRect();
    const plotWidth = rect.width - PAD.left - PAD.right;
    return Math.max(PAD.left, Math.min(PAD.left + plotWidth, event.clientX - rect.left));
  }

  timeAt(x) {
    const width = this.canvas.clientWidth - PAD.left - PAD.right;
    return this.data.from + ((x - PAD.left) / width) * (this.data.to - this.data.from);
  }

  xAt(time) {
    const width = this.canvas.clientWidth - PAD.left - PAD.right;
    return PAD.left + ((time - this.data.from) / (this.data.to - this.data.from)) * width;
  }

  finishDrag() {
    if (!this.drag) return;
    const { start, end } = this.drag;
    this.drag = null;
    this.draw();
    if (Math.abs(end - start) >= 3) {
      this.onBrush(Math.round(this.timeAt(Math.min(start, end))), Math.round(this.timeAt(Math.max(start, end))));
    } else if (this.pressed) {
      const exemplar = this.exemplarAt(this.pressed);
      if (exemplar) this.onExemplar(exemplar);
    }
  }

  /** Per bucket start: the values of each series, stacked in series order. */
  buckets() {
    const buckets = new Map();
    this.data.series.forEach((series, index) => {
      for (const [time, value] of series.points) {
        if (!buckets.has(time)) buckets.set(time, new Array(this.data.series.length).fill(0));
        buckets.get(time)[index] += value;
      }
    });
    return buckets;
  }

  draw() {
    const canvas = this.canvas;
    const width = canvas.parentElement.clientWidth;
    const ratio = window.devicePixelRatio || 1;
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(HEIGHT * ratio);
    canvas.style.width = `${width}px`;
    canvas.style.height = `${HEIGHT}px`;
    const ctx = canvas.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, HEIGHT);
    if (!this.data) return;
    const plotWidth = width - PAD.left - PAD.right;
    const plotHeight = HEIGHT - PAD.top - PAD.bottom;
    const { from, to, step_nanos: step } = this.data;
    const buckets = this.buckets();
    const max = niceCeiling(Math.max(0, ...[...buckets.values()].map((v) => v.reduce((a, b) => a + b, 0))));
    const yAt = (value) => PAD.top + plotHeight - (value / max) * plotHeight;

    ctx.font = "11px system-ui, sans-serif";
    ctx.fillStyle = "#666";
    ctx.strokeStyle = "#eee";
    ctx.textBaseline = "middle";
    ctx.textAlign = "right";
    for (let i = 0; i <= 4; i++) {
      const value = (max * i) / 4;
      const y = Math.round(yAt(value)) + 0.5;
      ctx.beginPath();
      ctx.moveTo(PAD.left, y);
      ctx.lineTo(PAD.left + plotWidth, y);
      ctx.stroke();
      ctx.fillText(formatValue(value, this.data.unit), PAD.left - 6, y);
    }
    const span = to - from;
    const every = tickStep(span, plotWidth, 90);
    ctx.textAlign = "center";
    ctx.textBaseline = "top";
    for (let t = Math.ceil(from / every) * every; t <= to; t += every) {
      const label = tickLabel(t, span);
      const half = ctx.measureText(label).width / 2;
      // Labels stay inside the canvas at both ends.
      const x = Math.min(Math.max(this.xAt(t), half), width - half);
      ctx.fillText(label, x, HEIGHT - PAD.bottom + 6);
    }

    for (const mark of this.marks) {
      const x0 = Math.max(PAD.left, this.xAt(mark.from));
      const x1 = Math.min(PAD.left + plotWidth, this.xAt(mark.to));
      if (x1 <= x0) continue;
      ctx.fillStyle = mark.color;
      ctx.globalAlpha = 0.18;
      ctx.fillRect(x0, PAD.top, x1 - x0, plotHeight);
      ctx.globalAlpha = 1;
    }

    const barWidth = Math.max((step / span) * plotWidth - 1, 1);
    for (const [time, values] of buckets) {
      let base = 0;
      values.forEach((value, index) => {
        if (!value) return;
        ctx.fillStyle = SERIES_COLORS[index % SERIES_COLORS.length];
        const top = yAt(base + value);
        ctx.fillRect(this.xAt(time), top, barWidth, yAt(base) - top);
        base += value;
      });
    }

    ctx.strokeStyle = "#fff";
    for (const dot of this.exemplarDots()) {
      ctx.fillStyle = "#7a3db8";
      ctx.beginPath();
      ctx.arc(dot.x, dot.y, DOT, 0, 2 * Math.PI);
      ctx.fill();
      ctx.stroke();
    }
    const picked = this.exemplarDots()[this.selected];
    if (picked) {
      ctx.strokeStyle = "#1d1d1d";
      ctx.lineWidth = 2;
      ctx.beginPath();
      ctx.arc(picked.x, picked.y, DOT + 3, 0, 2 * Math.PI);
      ctx.stroke();
      ctx.lineWidth = 1;
    }
    canvas.dataset.exemplars = String(this.exemplars.length);

    if (this.drag) {
      ctx.fillStyle = "rgba(59,111,182,0.2)";
      const x = Math.min(this.drag.start, this.drag.end);
      ctx.fillRect(x, PAD.top, Math.abs(this.drag.end - this.drag.start), plotHeight);
    } else if (this.hoverX != null) {
      ctx.strokeStyle = "#888";
      ctx.beginPath();
      ctx.moveTo(Math.round(this.hoverX) + 0.5, PAD.top);
      ctx.lineTo(Math.round(this.hoverX) + 0.5, PAD.top + plotHeight);
      ctx.stroke();
    }
    canvas.dataset.bars = String(buckets.size);
  }

  hover(event) {
    if (!this.data) return;
    const exemplar = this.exemplarAt(event);
    this.canvas.style.cursor = exemplar ? "pointer" : "crosshair";
    this.hoverX = this.xOf(event);
    const time = this.timeAt(this.hoverX);
    const step = this.data.step_nanos;
    const start = this.data.from + Math.floor((time - this.data.from) / step) * step;
    const lines = [formatDateTime(start)];
    let sum = 0;
    for (const series of this.data.series) {
      const point = series.points.find(([t]) => Math.abs(t - start) < step / 2);
      if (!point) continue;
      sum += point[1];
      const name = Object.entries(series.group || {}).map(([k, v]) => `${k}=${v}`).join(", ");
      if (name) lines.push(`${name}: ${formatValue(point[1], this.data.unit)}`);
    }
    lines.splice(1, 0, `total: ${formatValue(sum, this.data.unit)}`);
    if (exemplar) lines.push(`exemplar: ${exemplar.label} (click to open)`);
    this.tooltip.replaceChildren(
      ...lines.map((text) => {
        const div = document.createElement("div");
        div.textContent = text;
        return div;
      }),
    );
    this.tooltip.hidden = false;
    this.tooltip.style.left = `${Math.min(event.clientX + 14, window.innerWidth - 260)}px`;
    this.tooltip.style.top = `${event.clientY + 14}px`;
    this.draw();
  }
}
