// Autocomplete for a selector input: label names after `{` or `,`, the values of a label
// inside the quotes that follow `name=` (or `!=`, `=~`, `!~`).

const VALUE_CONTEXT = /([A-Za-z_][\w.]*)\s*(?:=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)$/;
const NAME_CONTEXT = /(?:^|[{,])\s*([A-Za-z_][\w.]*)?$/;
const MAX_SUGGESTIONS = 50;

function escapeValue(value) {
  return value.replace(/\\/g, "\\\\").replace(/"/g, '\\"');
}

/** What the text before the caret is asking for, and the span of text a pick replaces. */
export function context(before) {
  const value = VALUE_CONTEXT.exec(before);
  if (value) {
    return { kind: "value", label: value[1], prefix: value[2], start: before.length - value[2].length };
  }
  const name = NAME_CONTEXT.exec(before);
  if (name && !/"[^"]*$/.test(before.replace(/"(?:[^"\\]|\\.)*"/g, ""))) {
    const prefix = name[1] || "";
    return { kind: "name", prefix, start: before.length - prefix.length, open: !before.includes("{") };
  }
  return null;
}

export class SelectorAutocomplete {
  /** `source.names()` and `source.values(name)` answer promises of string arrays. */
  constructor(input, list, source) {
    this.input = input;
    this.list = list;
    this.source = source;
    this.items = [];
    this.active = -1;
    input.addEventListener("input", () => this.update());
    input.addEventListener("focus", () => this.update());
    input.addEventListener("click", () => this.update());
    input.addEventListener("blur", () => setTimeout(() => this.close(), 150));
    input.addEventListener("keydown", (event) => this.key(event));
  }

  async update() {
    const before = this.input.value.slice(0, this.input.selectionStart);
    const ctx = context(before);
    if (!ctx) return this.close();
    let options;
    try {
      options = ctx.kind === "value" ? await this.source.values(ctx.label) : await this.source.names();
    } catch {
      return this.close();
    }
    // The text may have changed while the request was out.
    if (this.input.value.slice(0, this.input.selectionStart) !== before) return;
    const prefix = ctx.prefix.toLowerCase();
    this.ctx = ctx;
    this.items = options.filter((o) => o.toLowerCase().startsWith(prefix) && o !== ctx.prefix).slice(0, MAX_SUGGESTIONS);
    this.active = this.items.length ? 0 : -1;
    this.render();
  }

  render() {
    this.list.replaceChildren(
      ...this.items.map((item, index) => {
        const li = document.createElement("li");
        li.textContent = item;
        li.setAttribute("role", "option");
        if (index === this.active) li.setAttribute("aria-selected", "true");
        // mousedown, not click: a click would blur the input and close the list first.
        li.addEventListener("mousedown", (event) => {
          event.preventDefault();
          this.pick(item);
        });
        return li;
      }),
    );
    this.list.hidden = this.items.length === 0 || document.activeElement !== this.input;
  }

  close() {
    this.items = [];
    this.list.hidden = true;
  }

  key(event) {
    if (this.list.hidden) return;
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      const step = event.key === "ArrowDown" ? 1 : -1;
      this.active = (this.active + step + this.items.length) % this.items.length;
      this.render();
      event.preventDefault();
    } else if ((event.key === "Enter" || event.key === "Tab") && this.active >= 0) {
      this.pick(this.items[this.active]);
      event.preventDefault();
    } else if (event.key === "Escape") {
      this.close();
    }
  }

  pick(item) {
    const { value, selectionStart: caret } = this.input;
    const ctx = this.ctx;
    let insert;
    if (ctx.kind === "value") {
      const after = value.slice(caret);
      insert = `${escapeValue(item)}"`;
      // Skip a closing quote already there.
      const rest = after.startsWith('"') ? after.slice(1) : after;
      this.input.value = value.slice(0, ctx.start) + insert + (rest || "}");
    } else {
      insert = `${ctx.open ? "{" : ""}${item}="`;
      this.input.value = value.slice(0, ctx.start) + insert + value.slice(caret);
    }
    const position = ctx.start + insert.length;
    this.input.setSelectionRange(position, position);
    this.input.focus();
    this.update();
  }
}
