// The call graph of a flame graph answer, as pprof's graph view and the API's
// `format=dot` draw it: one node per function with its flat (self) and cumulative value,
// one edge per caller → callee with the value through it, only the functions with the
// largest cumulative values. Computed here from the tree exactly as `query/src/render/dot.rs`
// does, and laid out as layered SVG (callers above callees). Hover or focus a node or an
// edge to highlight it with its neighbours; click (or Enter) keeps the highlight.

import { formatValue, percent } from "./format.js";

/** `query/src/render/dot.rs`'s `DEFAULT_DOT_NODES`. */
export const MAX_FUNCTIONS = 100;

/**
 * `{functions: [{name, flat, cum}], edges: [{from, to, value}], total, dropped}`: the
 * `limit` functions of the largest cumulative value (ties by name) and the edges between
 * them. A function's cumulative value, and an edge's, count a stack once however often the
 * function (the edge) recurs in it.
 */
export function callGraph(root, limit = MAX_FUNCTIONS) {
  const functions = new Map();
  const edges = new Map();
  const walk = (node, path) => {
    const name = node.name;
    const f = functions.get(name) || functions.set(name, { name, flat: 0, cum: 0 }).get(name);
    f.flat += node.self;
    if (!path.includes(name)) f.cum += node.total;
    if (path.length) {
      const caller = path[path.length - 1];
      let recurs = false;
      for (let i = 0; i + 1 < path.length && !recurs; i++) recurs = path[i] === caller && path[i + 1] === name;
      if (!recurs) {
        const key = JSON.stringify([caller, name]);
        const edge = edges.get(key) || edges.set(key, { from: caller, to: name, value: 0 }).get(key);
        edge.value += node.total;
      }
    }
    path.push(name);
    for (const child of node.children || []) walk(child, path);
    path.pop();
  };
  for (const child of root.children || []) walk(child, []);
  // Rust's `str::cmp` orders by bytes; for names in the BMP code units do the same.
  const ranked = [...functions.values()].sort((a, b) => b.cum - a.cum || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const kept = ranked.slice(0, limit);
  const names = new Set(kept.map((f) => f.name));
  return {
    functions: kept,
    edges: [...edges.values()].filter((e) => names.has(e.from) && names.has(e.to)),
    total: root.total,
    dropped: ranked.length - kept.length,
  };
}

const NS = "http://www.w3.org/2000/svg";
const LINE = 15;
const NODE_HEIGHT = 3 * LINE + 8;
const LAYER_GAP = 70;
const NODE_GAP = 44;
const CHAR = 7.2;
const MAX_LABEL = 48;
const MARGIN = 20;

function svg(tag, attrs = {}, parent = null) {
  const el = document.createElementNS(NS, tag);
  for (const [name, value] of Object.entries(attrs)) el.setAttribute(name, String(value));
  parent?.append(el);
  return el;
}

const short = (name) => (name.length <= MAX_LABEL ? name : `${name.slice(0, MAX_LABEL - 1)}…`);

/**
 * Layers and positions: cycles broken by a depth-first search from the largest functions
 * (an edge back to a function on the search's path does not rank), each function one layer
 * below its lowest ranked caller, functions ordered in their layer by the mean position of
 * their neighbours (a few sweeps down and up), then placed under their callers.
 */
export function layout(graph, lines) {
  const nodes = graph.functions.map((f, index) => ({
    ...f, index, rank: 0, order: 0, x: 0, y: 0, lines: lines(f),
    height: NODE_HEIGHT, out: [], in: [],
  }));
  for (const n of nodes) n.width = Math.max(...n.lines.map((t) => t.length)) * CHAR + 16;
  const byName = new Map(nodes.map((n) => [n.name, n]));
  const edges = graph.edges.map((e) => ({ ...e, source: byName.get(e.from), target: byName.get(e.to), back: false }));
  for (const e of edges) {
    e.source.out.push(e);
    e.target.in.push(e);
  }
  // Depth-first from functions nobody calls (largest first), then from the rest.
  const state = new Map();
  const topo = [];
  const visit = (n) => {
    state.set(n, "open");
    for (const e of n.out) {
      const s = state.get(e.target);
      if (s === "open" || e.target === n) e.back = true;
      else if (!s) visit(e.target);
    }
    state.set(n, "done");
    topo.push(n);
  };
  for (const n of nodes.filter((n) => !n.in.some((e) => e.source !== n))) if (!state.has(n)) visit(n);
  for (const n of nodes) if (!state.has(n)) visit(n);
  topo.reverse();
  for (const n of topo) {
    for (const e of n.out) if (!e.back) e.target.rank = Math.max(e.target.rank, n.rank + 1);
  }
  const layers = [];
  for (const n of topo) (layers[n.rank] ||= []).push(n);
  layers.forEach((layer) => layer.forEach((n, i) => (n.order = i)));
  const mean = (values) => (values.length ? values.reduce((a, b) => a + b, 0) / values.length : null);
  for (let sweep = 0; sweep < 4; sweep++) {
    const down = sweep % 2 === 0;
    const sequence = down ? layers.slice(1) : layers.slice(0, -1).reverse();
    for (const layer of sequence) {
      for (const n of layer) {
        const around = down ? n.in.filter((e) => !e.back).map((e) => e.source.order) : n.out.filter((e) => !e.back).map((e) => e.target.order);
        n.key = mean(around) ?? n.order;
      }
      layer.sort((a, b) => a.key - b.key || a.order - b.order).forEach((n, i) => (n.order = i));
    }
  }
  // Placement: each layer left to right, every function as near the middle of its callers
  // as the ones before it allow.
  for (const [rank, layer] of layers.entries()) {
    let right = -Infinity;
    for (const n of layer) {
      const callers = n.in.filter((e) => !e.back && e.source.rank < rank).map((e) => e.source.x + e.source.width / 2);
      const want = (mean(callers) ?? 0) - n.width / 2;
      n.x = Math.max(want, right + NODE_GAP);
      right = n.x + n.width;
      n.y = MARGIN + rank * (NODE_HEIGHT + LAYER_GAP);
    }
  }
  const left = Math.min(...nodes.map((n) => n.x));
  for (const n of nodes) n.x += MARGIN - left;
  const width = Math.max(...nodes.map((n) => n.x + n.width)) + MARGIN + 80;
  const height = MARGIN * 2 + layers.length * (NODE_HEIGHT + LAYER_GAP) - LAYER_GAP;
  return { nodes, edges, width: nodes.length ? width : 0, height: nodes.length ? height : 0 };
}

/** The point of a cubic Bézier at t = ½. */
const middle = (p0, p1, p2, p3) => (p0 + 3 * p1 + 3 * p2 + p3) / 8;

export class CallGraphView {
  /** `container`: an element the SVG is drawn into. */
  constructor(container) {
    this.container = container;
    this.pinned = null;
    this.graph = null;
  }

  clear() {
    this.graph = null;
    this.container.replaceChildren();
  }

  show(data) {
    this.info = data;
    this.graph = callGraph(data.root);
    this.pinned = null;
    this.draw();
  }

  draw() {
    const total = this.graph.total;
    const unit = this.info.unit;
    const lines = (f) => [
      short(f.name),
      `flat ${formatValue(f.flat, unit)} (${percent(f.flat, total)})`,
      `cum ${formatValue(f.cum, unit)} (${percent(f.cum, total)})`,
    ];
    const { nodes, edges, width, height } = layout(this.graph, lines);
    const root = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, class: "callgraph", role: "group" });
    root.setAttribute("aria-label", `call graph of ${nodes.length} functions; Tab through them, Enter keeps a highlight`);
    const defs = svg("defs", {}, root);
    const marker = svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 9, markerHeight: 9, markerUnits: "userSpaceOnUse", orient: "auto" }, defs);
    svg("path", { d: "M0,0 L10,5 L0,10 z", class: "arrowhead" }, marker);
    const edgeLayer = svg("g", { class: "edges" }, root);
    const nodeLayer = svg("g", { class: "nodes" }, root);
    this.elements = new Map();
    for (const e of edges) {
      const s = e.source;
      const t = e.target;
      let d;
      let label;
      if (s === t) {
        const x = s.x + s.width;
        const y = s.y + s.height / 2;
        d = `M${x},${y - 10} C${x + 34},${y - 26} ${x + 34},${y + 26} ${x},${y + 10}`;
        label = [x + 24, y];
      } else if (t.rank > s.rank) {
        const [x1, y1, x2, y2] = [s.x + s.width / 2, s.y + s.height, t.x + t.width / 2, t.y];
        const bend = (y2 - y1) / 2;
        d = `M${x1},${y1} C${x1},${y1 + bend} ${x2},${y2 - bend} ${x2},${y2}`;
        label = [middle(x1, x1, x2, x2), middle(y1, y1 + bend, y2 - bend, y2)];
      } else {
        // Back to a caller above (recursion through others): around the right side.
        const [x1, y1, x2, y2] = [s.x + s.width, s.y + s.height / 2, t.x + t.width, t.y + t.height / 2];
        const out = Math.max(x1, x2) + 60;
        d = `M${x1},${y1} C${out},${y1} ${out},${y2} ${x2},${y2}`;
        label = [middle(x1, out, out, x2), middle(y1, y1, y2, y2)];
      }
      const g = svg("g", { class: "edge", tabindex: 0 }, edgeLayer);
      Object.assign(g.dataset, { from: e.from, to: e.to, value: String(e.value) });
      g.setAttribute("aria-label", `${e.from} calls ${e.to}: ${formatValue(e.value, unit)} (${percent(e.value, total)})`);
      svg("title", {}, g).textContent = g.getAttribute("aria-label");
      svg("path", { d, "stroke-width": (1 + 5 * Math.sqrt(total ? Math.max(e.value, 0) / total : 0)).toFixed(2), "marker-end": "url(#arrow)" }, g);
      svg("text", { x: label[0] + 4, y: label[1], class: "edge-label" }, g).textContent = formatValue(e.value, unit);
      this.bind(g, [e.from, e.to], [e]);
    }
    for (const n of nodes) {
      const g = svg("g", { class: "node", tabindex: 0, transform: `translate(${n.x},${n.y})` }, nodeLayer);
      Object.assign(g.dataset, { name: n.name, flat: String(n.flat), cum: String(n.cum) });
      const [, flat, cum] = n.lines;
      g.setAttribute("aria-label", `${n.name}, ${flat}, ${cum}`);
      svg("title", {}, g).textContent = `${n.name}\n${flat}\n${cum}`;
      const share = total ? Math.max(n.flat, 0) / total : 0;
      svg("rect", { width: n.width, height: n.height, rx: 4, fill: `hsl(14, 80%, ${Math.round(97 - 35 * Math.sqrt(share))}%)` }, g);
      n.lines.forEach((text, i) => {
        svg("text", { x: 8, y: 4 + LINE * (i + 0.8), class: i ? "figure" : "name" }, g).textContent = text;
      });
      const touching = n.in.concat(n.out);
      this.bind(g, [n.name, ...touching.map((e) => e.from), ...touching.map((e) => e.to)], touching);
    }
    this.container.replaceChildren(root);
    this.svg = root;
  }

  /** Hover and focus highlight `names` and `edges`; a click or Enter keeps it. */
  bind(element, names, edges) {
    const set = { names: new Set(names), edges: new Set(edges.map((e) => `${e.from}\n${e.to}`)), element };
    const show = () => this.highlight(set);
    const hide = () => this.highlight(this.pinned);
    element.addEventListener("mouseenter", show);
    element.addEventListener("focus", show);
    element.addEventListener("mouseleave", hide);
    element.addEventListener("blur", hide);
    const pin = () => {
      this.pinned = this.pinned?.element === element ? null : set;
      this.highlight(this.pinned || set);
    };
    element.addEventListener("click", pin);
    element.addEventListener("keydown", (event) => {
      if (event.key === "Enter" || event.key === " ") {
        event.preventDefault();
        pin();
      }
    });
  }

  highlight(set) {
    if (!this.svg) return;
    this.svg.classList.toggle("highlighting", Boolean(set));
    for (const g of this.svg.querySelectorAll(".node")) {
      g.classList.toggle("hl", Boolean(set?.names.has(g.dataset.name)));
      g.classList.toggle("pinned", this.pinned?.element === g);
    }
    for (const g of this.svg.querySelectorAll(".edge")) {
      g.classList.toggle("hl", Boolean(set?.edges.has(`${g.dataset.from}\n${g.dataset.to}`)));
    }
  }
}
