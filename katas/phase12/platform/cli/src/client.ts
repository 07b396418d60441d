// The HTTP client: one request to the platform, its status and its JSON answer (CLI.md).

import { todo } from "./todo";

export interface Answer {
  status: number; // the HTTP status the server answered with
  body: unknown; // its JSON answer, parsed
}

// Something went wrong before an answer could be read: the server could not be reached, did not
// answer within the timeout, or answered something that is not JSON. The CLI exits 1 on it.
export class TransportError extends Error {}

// `method` `path` on `server` (a base URL: "http://127.0.0.1:8080"), with `body` as JSON when
// given, giving up after `timeoutS` seconds.
export async function call(
  server: string,
  method: string,
  path: string,
  body: object | undefined,
  timeoutS: number,
): Promise<Answer> {
  todo("client.ts call(): fetch server + path, the body as JSON, within timeoutS; parse the answer");
}
