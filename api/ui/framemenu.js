// A flame graph frame's menu: right-click on a frame, or the context-menu key (or Shift+F10,
// or `m`) on the focused canvas for the frame zoomed to. Each item adds a rule for exactly
// that function to the filter bar; arrow keys move between items, Escape closes.

export class FrameMenu {
  /** `element`: the menu's container; `onPick(kind, name)` for a rule, `onSandwich(name)`. */
  constructor(element, onPick, onSandwich) {
    this.element = element;
    this.onPick = onPick;
    this.onSandwich = onSandwich;
    this.returnTo = null;
    element.setAttribute("role", "menu");
    element.addEventListener("keydown", (event) => this.key(event));
    element.addEventListener("focusout", (event) => {
      if (!element.contains(event.relatedTarget)) this.close(false);
    });
    document.addEventListener("mousedown", (event) => {
      if (!element.hidden && !element.contains(event.target)) this.close(false);
    });
  }

  /** Opens the menu of function `name` at client coordinates; `returnTo` gets focus back. */
  open(name, x, y, returnTo) {
    this.returnTo = returnTo;
    const item = (text, action) => {
      const button = document.createElement("button");
      button.type = "button";
      button.setAttribute("role", "menuitem");
      button.textContent = text;
      button.addEventListener("click", () => {
        this.close(true);
        action();
      });
      return button;
    };
    const title = document.createElement("div");
    title.className = "menu-title";
    title.textContent = name;
    this.element.replaceChildren(
      title,
      item(`Focus on ${name}`, () => this.onPick("focus", name)),
      item(`Hide ${name}`, () => this.onPick("hide", name)),
      item(`Drop stacks with ${name}`, () => this.onPick("drop", name)),
      item(`Sandwich of ${name}`, () => this.onSandwich(name)),
    );
    this.element.setAttribute("aria-label", `frame ${name}`);
    this.element.hidden = false;
    const box = this.element.getBoundingClientRect();
    this.element.style.left = `${Math.max(4, Math.min(x, window.innerWidth - box.width - 4))}px`;
    this.element.style.top = `${Math.max(4, Math.min(y, window.innerHeight - box.height - 4))}px`;
    this.items()[0].focus();
  }

  items() {
    return [...this.element.querySelectorAll("button")];
  }

  close(refocus) {
    if (this.element.hidden) return;
    this.element.hidden = true;
    if (refocus) this.returnTo?.focus();
  }

  key(event) {
    const items = this.items();
    const at = items.indexOf(document.activeElement);
    const move = { ArrowDown: 1, ArrowUp: -1, Home: -at, End: items.length - 1 - at }[event.key];
    if (move !== undefined) {
      event.preventDefault();
      items[(at + move + items.length) % items.length].focus();
    } else if (event.key === "Escape" || event.key === "Tab") {
      event.preventDefault();
      this.close(true);
    }
  }
}
