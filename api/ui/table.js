// A sortable table of functions: click a header to sort by it (again to reverse), click a
// row to search the flame graph for that function, its ⇅ button for its sandwich. Headers
// and rows are reachable by keyboard (Enter or Space acts), and each row reads out its
// function with its values, so a screen reader gets the flame graph's content here.

/** Enter and Space act on a focused element as a click would. */
function actOnKeys(element, action) {
  element.addEventListener("keydown", (event) => {
    if (event.target !== element || (event.key !== "Enter" && event.key !== " ")) return;
    event.preventDefault();
    action();
  });
}

export class FunctionTable {
  /** `onSelect(name)` is called when a row is clicked, `onSandwich(name)` (if given) from its ⇅ button. */
  constructor(table, onSelect, onSandwich) {
    this.table = table;
    this.onSelect = onSelect;
    this.onSandwich = onSandwich;
    this.columns = [];
    this.rows = [];
    this.sort = null;
  }

  /**
   * `columns`: `[{key, label, format(value, row)}]`, the first being the name; `sort`: the
   * key sorted by (largest first) until a header is clicked.
   */
  show(columns, rows, sort) {
    this.columns = columns;
    this.rows = rows;
    this.sort = { key: sort, descending: true };
    this.render();
  }

  clear() {
    this.show([], [], null);
  }

  sortBy(key) {
    const descending = this.sort?.key === key ? !this.sort.descending : key !== "name";
    this.sort = { key, descending };
    this.render();
  }

  sorted() {
    const { key, descending } = this.sort;
    const sign = descending ? -1 : 1;
    const compare = (a, b) => (typeof a[key] === "string" ? a[key].localeCompare(b[key]) : a[key] - b[key]);
    // Ties keep the server's order, so the first row is stable across reloads.
    return this.rows.map((row, index) => [row, index]).sort(([a, i], [b, j]) => sign * compare(a, b) || i - j).map(([row]) => row);
  }

  render() {
    const head = document.createElement("tr");
    for (const column of this.columns) {
      const th = document.createElement("th");
      th.textContent = column.label;
      th.dataset.key = column.key;
      th.className = column.key === "name" ? "name" : "number";
      if (this.sort?.key === column.key) {
        th.setAttribute("aria-sort", this.sort.descending ? "descending" : "ascending");
      }
      th.tabIndex = 0;
      th.addEventListener("click", () => this.sortBy(column.key));
      actOnKeys(th, () => this.sortBy(column.key));
      head.append(th);
    }
    if (this.onSandwich && this.columns.length) {
      const th = document.createElement("th");
      th.textContent = "";
      th.setAttribute("aria-label", "sandwich view");
      head.append(th);
    }
    this.table.tHead.replaceChildren(head);
    const body = this.sort?.key ? this.sorted() : this.rows;
    this.table.tBodies[0].replaceChildren(
      ...body.map((row) => {
        const tr = document.createElement("tr");
        for (const column of this.columns) {
          const td = document.createElement("td");
          td.className = column.key === "name" ? "name" : "number";
          td.textContent = column.format ? column.format(row[column.key], row) : row[column.key];
          if (column.key === "name") td.title = row.name;
          if (column.className) td.classList.add(column.className(row));
          tr.append(td);
        }
        tr.tabIndex = 0;
        tr.setAttribute(
          "aria-label",
          this.columns.map((c) => (c.key === "name" ? row.name : `${c.label} ${c.format ? c.format(row[c.key], row) : row[c.key]}`)).join(", "),
        );
        tr.addEventListener("click", () => this.onSelect(row.name));
        actOnKeys(tr, () => this.onSelect(row.name));
        if (this.onSandwich) {
          const td = document.createElement("td");
          const button = document.createElement("button");
          button.type = "button";
          button.className = "sandwich-button";
          button.textContent = "⇅";
          button.title = `sandwich view of ${row.name}: callers and callees`;
          button.setAttribute("aria-label", button.title);
          button.addEventListener("click", (event) => {
            event.stopPropagation();
            this.onSandwich(row.name);
          });
          td.append(button);
          tr.append(td);
        }
        return tr;
      }),
    );
  }
}
