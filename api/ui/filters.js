// The filter bar: focus, drop and hide rules as removable chips, the API's named presets
// as toggles, and the granularity frames are named at. The rules live in the page state
// with the API's own parameter names (`focus`, `drop`, `hide` repeated, `preset`
// repeated, `aggregate_by`), so the URL carries them and every tree, top, diff and time
// series request sends them as they are.

/** Rule kinds, in the order the form offers them, with what a chip says of each. */
export const RULE_KINDS = [
  ["focus", "focus on"],
  ["drop", "drop stacks with"],
  ["hide", "hide"],
];
/** The frame fields a rule can match; `function` is the API's default. */
export const RULE_FIELDS = ["function", "system_name", "file", "binary", "address"];
/** What `aggregate_by` names frames by; `function` is the API's default. */
export const GRANULARITIES = [
  ["function", "function"],
  ["function_line", "function and line"],
  ["file", "file"],
  ["binary", "binary"],
  ["address", "address"],
];
/** The repeated parameters of the frame rules. */
export const RULE_PARAMS = ["focus", "drop", "hide", "preset"];

/** `name` as a regular expression matching exactly it (the API anchors patterns). */
export function escapeRegex(name) {
  return name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** The rule that matches frames named exactly `name`. */
export function functionRule(name) {
  return `function:${escapeRegex(name)}`;
}

/** The frame parameters of a request, from the page state. */
export function frameParams(state) {
  return {
    focus: state.focus, drop: state.drop, hide: state.hide, preset: state.preset,
    aggregate_by: state.aggregate_by,
  };
}

/** Only the parameters that change which stacks count (the time series reads no others). */
export function stackParams(state) {
  return { focus: state.focus, drop: state.drop };
}

export class FilterBar {
  /**
   * `elements`: `{form, kind, field, pattern, chips, presets, granularity}`; `state` holds
   * the rule lists; `onChange()` runs the query again after an edit.
   */
  constructor(elements, state, onChange) {
    this.el = elements;
    this.state = state;
    this.onChange = onChange;
    this.presets = [];
    elements.kind.replaceChildren(...RULE_KINDS.map(([kind, label]) => new Option(label, kind)));
    elements.field.replaceChildren(...RULE_FIELDS.map((field) => new Option(field, field)));
    elements.granularity.replaceChildren(...GRANULARITIES.map(([value, label]) => new Option(label, value)));
    elements.form.addEventListener("submit", (event) => {
      event.preventDefault();
      const pattern = elements.pattern.value.trim();
      if (!pattern) return;
      elements.pattern.value = "";
      this.add(elements.kind.value, `${elements.field.value}:${pattern}`);
    });
    elements.granularity.addEventListener("change", () => {
      this.state.aggregate_by = elements.granularity.value === "function" ? "" : elements.granularity.value;
      this.onChange();
    });
  }

  /** Adds a rule (`[field:]pattern`) of `kind` and runs the query. */
  add(kind, text) {
    if (!this.state[kind].includes(text)) this.state[kind] = [...this.state[kind], text];
    this.render();
    this.onChange();
  }

  remove(kind, text) {
    this.state[kind] = this.state[kind].filter((t) => t !== text);
    this.render();
    this.onChange();
  }

  /** The presets the server knows, as toggles. A failure leaves the presets of the URL as chips. */
  async loadPresets(api) {
    try {
      this.presets = (await api.json("/api/v1/filter-presets")).presets;
    } catch {
      this.presets = [];
    }
    this.render();
  }

  /** Shows the state: chips, toggles and granularity. */
  render() {
    const chips = [];
    for (const [kind, label] of RULE_KINDS) {
      for (const text of this.state[kind]) chips.push(this.chip(`${label} ${text}`, `remove the rule ${kind} ${text}`, () => this.remove(kind, text)));
    }
    // Presets the server did not list (a link from another version) stay removable.
    const known = new Set(this.presets.map((p) => p.name));
    for (const name of this.state.preset.filter((n) => !known.has(n))) {
      chips.push(this.chip(`preset ${name}`, `remove the preset ${name}`, () => this.togglePreset(name, false)));
    }
    this.el.chips.replaceChildren(...chips);
    this.el.presets.replaceChildren(
      ...this.presets.map((preset) => {
        const label = document.createElement("label");
        const box = document.createElement("input");
        box.type = "checkbox";
        box.id = `preset-${preset.name}`;
        box.checked = this.state.preset.includes(preset.name);
        box.addEventListener("change", () => this.togglePreset(preset.name, box.checked));
        label.title = `${preset.description}\n${preset.rules.map((r) => `${r.kind} ${r.field}:${r.pattern}`).join("\n")}`;
        label.append(box, ` ${preset.name}`);
        return label;
      }),
    );
    this.el.granularity.value = this.state.aggregate_by || "function";
  }

  togglePreset(name, on) {
    const others = this.state.preset.filter((n) => n !== name);
    this.state.preset = on ? [...others, name] : others;
    this.render();
    this.onChange();
  }

  chip(text, title, onRemove) {
    const chip = document.createElement("span");
    chip.className = "chip";
    chip.textContent = text;
    const remove = document.createElement("button");
    remove.type = "button";
    remove.textContent = "×";
    remove.title = title;
    remove.setAttribute("aria-label", title);
    remove.addEventListener("click", onRemove);
    chip.append(remove);
    return chip;
  }
}
