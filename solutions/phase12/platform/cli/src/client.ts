// The HTTP client: one request to the platform, its status and its JSON answer (CLI.md).

import * as http from "http";

export interface Answer {
  status: number; // the HTTP status the server answered with
  body: unknown; // its JSON answer, parsed
}

// Something went wrong before an answer could be read: the server could not be reached, did not
// answer within the timeout, or answered something that is not JSON. The CLI exits 1 on it.
export class TransportError extends Error {}

// The body's length in bytes, as UTF-8 (node would send it chunked without one).
function utf8Length(text: string): number {
  let n = 0;
  for (const ch of text) {
    const c = ch.codePointAt(0) ?? 0;
    n += c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
  }
  return n;
}

// `method` `path` on `server` (a base URL: "http://127.0.0.1:8080"), with `body` as JSON when
// given, giving up after `timeoutS` seconds. node's http rather than fetch: it starts in a third
// of fetch's time (no WebAssembly parser to compile), and a CLI is mostly its start.
export function call(
  server: string,
  method: string,
  path: string,
  body: object | undefined,
  timeoutS: number,
): Promise<Answer> {
  const url = server.replace(/\/+$/, "") + path;
  const data = body === undefined ? undefined : JSON.stringify(body);
  const headers: Record<string, string | number> = { Accept: "application/json" };
  if (data !== undefined) {
    headers["Content-Type"] = "application/json";
    headers["Content-Length"] = utf8Length(data);
  }
  return new Promise<Answer>((resolve, reject) => {
    let req: http.ClientRequest;
    // One deadline for the whole exchange: connect, send, the answer's last byte.
    const timer = setTimeout(() => {
      req.destroy(new TransportError(`${method} ${url} did not answer within ${timeoutS} s`));
    }, timeoutS * 1000);
    const fail = (e: Error & { code?: string }) => {
      clearTimeout(timer);
      reject(e instanceof TransportError ? e : new TransportError(`cannot reach ${url}: ${e.code ?? e.message}`));
    };
    try {
      req = http.request(url, { method, headers }, (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk) => {
          text += chunk;
        });
        res.on("error", fail);
        res.on("end", () => {
          clearTimeout(timer);
          const status = res.statusCode ?? 0;
          try {
            resolve({ status, body: JSON.parse(text) });
          } catch {
            reject(new TransportError(`${method} ${url} answered HTTP ${status} with a body that is not JSON`));
          }
        });
      });
    } catch (e) {
      // An invalid URL (--server nonsense) throws here, before any request.
      fail(e as Error);
      return;
    }
    req.on("error", fail);
    if (data !== undefined) req.write(data);
    req.end();
  });
}
