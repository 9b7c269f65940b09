// Comparison presets of the diff view. "Same range a week earlier": the comparison is the
// range shown, the baseline the same range 7 days before. "Previous value of a label": the
// comparison selects the value picked (a `service.version`, say), the baseline the value
// before it among the label's sorted values. Both write the diff's six parameters, so the
// URL holds the result; `compare`, `compare_label` and `compare_value` keep what was picked.

import { parseTime } from "./format.js";

const WEEK = 7n * 86_400n * 1_000_000_000n;

/** A `from`/`to` as exact unix nanoseconds (a BigInt); null when it cannot be read. */
function absolute(text, now) {
  if (/^\d+$/.test(text)) return BigInt(text);
  const nanos = parseTime(text, now);
  return nanos === null ? null : BigInt(Math.round(nanos));
}

/** The diff's ranges for the range `from`..`to`: the comparison it, the baseline 7 days earlier. */
export function weekEarlier(from, to, now = Date.now() * 1e6) {
  const [start, end] = [absolute(from, now), absolute(to, now)];
  if (start === null || end === null) return null;
  return {
    comparison_from: String(start), comparison_to: String(end),
    baseline_from: String(start - WEEK), baseline_to: String(end - WEEK),
  };
}

// One matcher of a selector: `name op "value"`.
const MATCHER = /\s*([^\s=!~,{}"]+)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*/g;

/** `selector` with `name="value"` in place of any `name=` matcher it had. */
export function withMatcher(selector, name, value) {
  const body = selector.trim().replace(/^\{|\}$/g, "");
  const kept = [...body.matchAll(MATCHER)].filter((m) => !(m[1] === name && m[2] === "=")).map((m) => m[0].trim());
  const quoted = value.replace(/\\/g, "\\\\").replace(/"/g, '\\"');
  return `{${[...kept, `${name}="${quoted}"`].join(", ")}}`;
}

/** The value before `value` in the label's values sorted as the API sorts them (by bytes). */
export function previousValue(values, value) {
  const sorted = [...values].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const at = sorted.indexOf(value);
  return at > 0 ? sorted[at - 1] : null;
}

export class ComparePresets {
  /**
   * `elements`: `{kind, label, value, labelBox, valueBox, message}` selects and boxes;
   * `state`: the page state; `labels`: the page's label cache (`names()`, `values(name)`);
   * `onApply()` runs the diff once the sides are set.
   */
  constructor(elements, state, labels, onApply) {
    this.el = elements;
    this.state = state;
    this.labels = labels;
    this.onApply = onApply;
    elements.kind.addEventListener("change", () => this.pick(elements.kind.value));
    elements.label.addEventListener("change", async () => {
      this.state.compare_label = elements.label.value;
      this.state.compare_value = "";
      await this.fillValues();
      this.applyLabel();
    });
    elements.value.addEventListener("change", () => {
      this.state.compare_value = elements.value.value;
      this.applyLabel();
    });
  }

  /** Shows the state; fills the label pickers when the label preset is on. */
  render() {
    const { kind, labelBox, valueBox } = this.el;
    if (this.state.compare === "label" && !this.values && !this.filling) {
      // A link with the label preset: its pickers' other choices, without applying anything.
      this.filling = this.fillNames().then(() => this.fillValues()).finally(() => (this.filling = null));
    }
    kind.value = this.state.compare || "";
    labelBox.hidden = valueBox.hidden = this.state.compare !== "label";
    for (const [select, name] of [[this.el.label, "compare_label"], [this.el.value, "compare_value"]]) {
      if (this.state[name] && ![...select.options].some((o) => o.value === this.state[name])) select.add(new Option(this.state[name]));
      select.value = this.state[name];
    }
  }

  say(text) {
    this.el.message.textContent = text;
  }

  async pick(kind) {
    this.state.compare = kind;
    this.say("");
    this.render();
    if (kind === "week") return this.applyWeek();
    if (kind === "label") {
      await this.fillNames();
      await this.fillValues();
      return this.applyLabel();
    }
  }

  applyWeek() {
    const sides = weekEarlier(this.state.from, this.state.to);
    if (!sides) return this.say(`cannot read the range ${this.state.from} to ${this.state.to}`);
    Object.assign(this.state, sides, { baseline_selector: this.state.selector, comparison_selector: this.state.selector });
    this.onApply();
  }

  async fillNames() {
    let names = [];
    try {
      names = await this.labels.names();
    } catch (error) {
      return this.say(error.message);
    }
    const select = this.el.label;
    select.replaceChildren(...names.map((n) => new Option(n, n)));
    if (!names.includes(this.state.compare_label)) {
      this.state.compare_label = names.includes("service.version") ? "service.version" : names[0] || "";
    }
    select.value = this.state.compare_label;
  }

  /** The picked label's values, newest (last sorted) picked unless one was. */
  async fillValues() {
    const name = this.state.compare_label;
    let values = [];
    try {
      values = name ? await this.labels.values(name) : [];
    } catch (error) {
      this.values = [];
      return this.say(error.message);
    }
    this.values = values;
    const sorted = [...values].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    this.el.value.replaceChildren(...sorted.map((v) => new Option(v, v)));
    if (!sorted.includes(this.state.compare_value)) this.state.compare_value = sorted.at(-1) || "";
    this.el.value.value = this.state.compare_value;
  }

  applyLabel() {
    const { compare_label: name, compare_value: value } = this.state;
    if (!name || !value) return this.say("pick a label and a value");
    const before = previousValue(this.values || [], value);
    if (before === null) return this.say(`no value of ${name} sorts before ${value}: pick a later one`);
    this.say(`baseline ${name}="${before}"`);
    Object.assign(this.state, {
      comparison_selector: withMatcher(this.state.selector, name, value),
      baseline_selector: withMatcher(this.state.selector, name, before),
      comparison_from: this.state.from, comparison_to: this.state.to,
      baseline_from: this.state.from, baseline_to: this.state.to,
    });
    this.onApply();
  }
}
