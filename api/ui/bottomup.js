// The bottom-up (inverted) tree, from a flame graph answer: one row per function with its
// self value, sorted by it, each expandable to its callers. A caller row holds the value of
// the stacks that end in the function and pass through that caller (the self values of
// the frames below it on that path), and expands to its own callers, up to the root.
// Shown as a tree grid: → or Enter expands, ← collapses, ↑ and ↓ move.

import { formatValue, percent } from "./format.js";

function entry(name) {
  return { name, value: 0, callers: new Map() };
}

/** `[{name, value, callers: Map(name → same shape)}]`, largest self value first. */
export function bottomUp(root) {
  const functions = new Map();
  const walk = (node, path) => {
    if (node.self > 0) {
      let at = functions.get(node.name) || functions.set(node.name, entry(node.name)).get(node.name);
      at.value += node.self;
      for (let i = path.length - 1; i >= 0; i--) {
        const name = path[i];
        at = at.callers.get(name) || at.callers.set(name, entry(name)).get(name);
        at.value += node.self;
      }
    }
    path.push(node.name);
    for (const child of node.children || []) walk(child, path);
    path.pop();
  };
  for (const child of root.children || []) walk(child, []);
  return sorted(functions);
}

function sorted(map) {
  return [...map.values()].sort((a, b) => b.value - a.value || a.name.localeCompare(b.name));
}

export class BottomUpTable {
  /** `table`: a `<table>` with a `<thead>` and a `<tbody>`. */
  constructor(table) {
    this.table = table;
    this.rows = [];
    this.open = new Set();
    table.setAttribute("role", "treegrid");
    table.addEventListener("keydown", (event) => this.key(event));
  }

  show(data) {
    this.info = data;
    this.rows = bottomUp(data.root);
    this.open = new Set();
    this.render();
  }

  clear() {
    this.info = null;
    this.rows = [];
    this.render();
  }

  /** Expands or collapses the row at `path` (function first, then callers). */
  toggle(path, open) {
    const key = JSON.stringify(path);
    const want = open ?? !this.open.has(key);
    if (want) this.open.add(key);
    else this.open.delete(key);
    this.render(key);
  }

  render(focusKey) {
    const head = document.createElement("tr");
    for (const [text, cls] of [["Function (callers below it)", "name"], ["Self / through caller", "number"]]) {
      const th = document.createElement("th");
      th.textContent = text;
      th.className = cls;
      head.append(th);
    }
    this.table.tHead.replaceChildren(this.info ? head : "");
    const body = [];
    const total = this.info?.total || 0;
    const add = (item, path, level) => {
      const key = JSON.stringify(path);
      const open = this.open.has(key);
      const tr = document.createElement("tr");
      tr.tabIndex = 0;
      tr.dataset.path = key;
      tr.dataset.value = String(item.value);
      tr.dataset.level = String(level);
      tr.setAttribute("aria-level", String(level));
      if (item.callers.size) tr.setAttribute("aria-expanded", String(open));
      const name = document.createElement("td");
      name.className = "name";
      name.title = item.name;
      name.style.paddingLeft = `${6 + (level - 1) * 16}px`;
      const twisty = document.createElement("span");
      twisty.className = "twisty";
      twisty.textContent = item.callers.size ? (open ? "▾" : "▸") : "";
      name.append(twisty, level > 1 ? `← ${item.name}` : item.name);
      const value = document.createElement("td");
      value.className = "number";
      value.textContent = `${formatValue(item.value, this.info.unit)} · ${percent(item.value, total)}`;
      tr.append(name, value);
      tr.setAttribute("aria-label", `${level > 1 ? "called from " : ""}${item.name}, ${level > 1 ? "through it" : "self"} ${value.textContent}`);
      tr.addEventListener("click", () => item.callers.size && this.toggle(path));
      body.push(tr);
      if (open) for (const caller of sorted(item.callers)) add(caller, [...path, caller.name], level + 1);
    };
    for (const item of this.rows) add(item, [item.name], 1);
    this.table.tBodies[0].replaceChildren(...body);
    if (focusKey) body.find((tr) => tr.dataset.path === focusKey)?.focus();
  }

  key(event) {
    const tr = event.target.closest("tr");
    if (!tr?.dataset.path) return;
    const path = JSON.parse(tr.dataset.path);
    const expandable = tr.hasAttribute("aria-expanded");
    const open = tr.getAttribute("aria-expanded") === "true";
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      event.preventDefault();
      (event.key === "ArrowDown" ? tr.nextElementSibling : tr.previousElementSibling)?.focus();
    } else if ((event.key === "ArrowRight" || event.key === "Enter" || event.key === " ") && expandable && !open) {
      event.preventDefault();
      this.toggle(path, true);
    } else if ((event.key === "ArrowLeft" || event.key === "Enter" || event.key === " ") && open) {
      event.preventDefault();
      this.toggle(path, false);
    } else if (event.key === "ArrowLeft" && path.length > 1) {
      event.preventDefault();
      this.table.querySelector(`tr[data-path="${CSS.escape(JSON.stringify(path.slice(0, -1)))}"]`)?.focus();
    }
  }
}
