// The query API as the page calls it: the tenant header on every request, the server's
// own error message on failure.

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export class Api {
  /**
   * `tenant()` names the tenant of each request (empty: the server's default); `token()`
   * is the tenant token a server with `--auth required` asks for (empty: none sent).
   */
  constructor(tenant, token) {
    this.tenant = tenant;
    this.token = token;
  }

  url(path, params = {}) {
    const query = new URLSearchParams();
    for (const [name, value] of Object.entries(params)) {
      // Arrays are repeated parameters (`focus=a&focus=b`).
      for (const one of Array.isArray(value) ? value : [value]) {
        if (one !== undefined && one !== null && one !== "") query.append(name, one);
      }
    }
    const text = query.toString();
    return text ? `${path}?${text}` : path;
  }

  /** A GET with `params`, or, given `body`, a JSON POST (a Connect RPC). */
  async request(path, params, signal, body) {
    const headers = body === undefined ? {} : { "Content-Type": "application/json" };
    const tenant = this.tenant();
    if (tenant) headers["X-Scope-OrgID"] = tenant;
    const token = this.token();
    if (token) headers.Authorization = `Bearer ${token}`;
    let response;
    try {
      const method = body === undefined ? "GET" : "POST";
      const payload = body === undefined ? undefined : JSON.stringify(body);
      response = await fetch(this.url(path, params), { method, headers, signal, body: payload });
    } catch (error) {
      if (error.name === "AbortError") throw error;
      throw new ApiError(0, `cannot reach the server: ${error.message}`);
    }
    if (!response.ok) {
      let message = `${response.status} ${response.statusText}`;
      try {
        // Ours say `error`, Connect's `message`.
        const answer = await response.json();
        if (answer.error || answer.message) message = answer.error || answer.message;
        if (response.status === 401) message += " (enter a tenant token in the Token field)";
      } catch {
        // Not our JSON error body (a proxy's page, say): the status line says enough.
      }
      throw new ApiError(response.status, message);
    }
    return response;
  }

  async json(path, params, signal) {
    return (await this.request(path, params, signal)).json();
  }

  /** Calls a Connect RPC (`/querier.v1.QuerierService/SelectSeries`, say) with a JSON body. */
  async rpc(path, body, signal) {
    return (await this.request(path, {}, signal, body)).json();
  }

  /** Saves the answer as a file; a plain link could not send the tenant header. */
  async download(path, params, filename) {
    const blob = await (await this.request(path, params)).blob();
    const link = document.createElement("a");
    link.href = URL.createObjectURL(blob);
    link.download = filename;
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 10_000);
  }
}
