// The one way the UI talks to the broker: its public HTTP API, with the logged-in user's
// basic credentials on every call. Errors come back as ApiError with the API's reason.

const REQUEST_TIMEOUT_MS = 15000;

export class ApiError extends Error {
  constructor(status, reason, field, headers) {
    super(reason);
    this.status = status;
    this.reason = reason;
    this.field = field;
    this.headers = headers;
  }
}

/** A path segment: vhosts and names are percent-encoded ("/" is %2F). */
export const seg = (name) => encodeURIComponent(name);

/** `/api/queues/%2F/orders`-style paths from segments. */
export function apiPath(...parts) {
  return `/api/${parts.map((part, i) => (i === 0 ? part : seg(part))).join('/')}`;
}

export class Api {
  constructor(credentials) {
    // Basic credentials are UTF-8 bytes in base64 (btoa takes one character per byte).
    const bytes = new TextEncoder().encode(`${credentials.user}:${credentials.password}`);
    this.authorization = `Basic ${btoa(String.fromCharCode(...bytes))}`;
  }

  get(path) { return this.request('GET', path); }
  put(path, body) { return this.request('PUT', path, {body}); }
  post(path, body) { return this.request('POST', path, {body}); }
  del(path, headers = {}) { return this.request('DELETE', path, {headers}); }

  /** The answer's JSON (null for an empty answer); an ApiError for any non-2xx. */
  async request(method, path, {body, headers = {}} = {}) {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), REQUEST_TIMEOUT_MS);
    let reply;
    try {
      reply = await fetch(path, {
        method,
        // "omit": a refused login must not make the browser open its own password prompt;
        // the Authorization header set here is sent all the same.
        credentials: 'omit',
        headers: {
          Authorization: this.authorization,
          ...(body === undefined ? {} : {'Content-Type': 'application/json'}),
          ...headers,
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: controller.signal,
      });
    } catch (error) {
      throw new ApiError(0, error.name === 'AbortError'
        ? `no answer from the broker in ${REQUEST_TIMEOUT_MS / 1000} s`
        : 'the broker cannot be reached');
    } finally {
      clearTimeout(timer);
    }
    const text = await reply.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch { data = null; }
    if (!reply.ok) {
      const reason = data?.reason ?? (text || reply.statusText);
      throw new ApiError(reply.status, reason, data?.field, reply.headers);
    }
    return data;
  }
}
