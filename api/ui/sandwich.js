// The sandwich of one function, from a flame graph answer: its callers (every path from
// the root down to it, reversed, the function as the root) and its callees (every subtree
// under it, merged), as Pyroscope and speedscope show them. A recursive function counts
// once per stack: only its outermost call is a root of the sandwich, so both totals equal
// the function's total in the top table.

function node(name) {
  return { name, self: 0, total: 0, children: [] };
}

function child(parent, name) {
  let found = parent.children.find((c) => c.name === name);
  if (!found) parent.children.push((found = node(name)));
  return found;
}

function merge(into, from) {
  into.total += from.total;
  into.self += from.self;
  for (const c of from.children || []) merge(child(into, c.name), c);
}

/** `{callers, callees}` of `name` in `root` (an API tree), both rooted at the function. */
export function sandwich(root, name) {
  const callers = node(name);
  const callees = node(name);
  const walk = (current, path) => {
    for (const c of current.children || []) {
      if (c.name === name) {
        merge(callees, c);
        // Callers: the path up to the function, nearest caller first; the last caller's
        // self holds the value, so the widths add up level by level.
        let at = callers;
        at.total += c.total;
        for (let i = path.length - 1; i >= 0; i--) {
          at = child(at, path[i]);
          at.total += c.total;
        }
        at.self += c.total;
      } else {
        path.push(c.name);
        walk(c, path);
        path.pop();
      }
    }
  };
  walk(root, []);
  return { callers, callees };
}
