// Given: the few Node.js globals and the part of its `http` module the CLI may use, so it
// type-checks with the typescript package alone (no @types/node, no DOM library). Use either
// `http.request` (what the reference does: node's own parser, the cheapest start) or `fetch`.

declare const process: {
  readonly argv: string[];
  readonly env: Record<string, string | undefined>;
  exitCode: number | undefined;
  exit(code?: number): never;
  readonly stdout: { write(text: string): boolean };
  readonly stderr: { write(text: string): boolean };
};

declare const console: {
  log(...values: unknown[]): void;
  error(...values: unknown[]): void;
};

declare function setTimeout(callback: () => void, ms: number): unknown;
declare function clearTimeout(handle: unknown): void;

// fetch, as Node.js 18+ has it (the subset a client needs).
interface AbortSignal {
  readonly aborted: boolean;
}
declare const AbortSignal: { timeout(ms: number): AbortSignal };
interface FetchResponse {
  readonly status: number;
  readonly ok: boolean;
  text(): Promise<string>;
}
declare function fetch(
  url: string,
  init?: { method?: string; headers?: Record<string, string>; body?: string; signal?: AbortSignal },
): Promise<FetchResponse>;

// node:http (import * as http from "http").
declare module "http" {
  interface IncomingMessage {
    readonly statusCode?: number;
    readonly headers: Record<string, string | string[] | undefined>;
    setEncoding(encoding: "utf8"): this;
    on(event: "data", listener: (chunk: string) => void): this;
    on(event: "end", listener: () => void): this;
    on(event: "error", listener: (err: Error) => void): this;
  }
  interface ClientRequest {
    on(event: "error", listener: (err: Error & { code?: string }) => void): this;
    on(event: "timeout", listener: () => void): this;
    setTimeout(ms: number, listener?: () => void): this;
    destroy(err?: Error): this;
    write(chunk: string): boolean;
    end(chunk?: string): this;
  }
  interface RequestOptions {
    method?: string;
    headers?: Record<string, string | number>;
    timeout?: number;
  }
  function request(
    url: string,
    options: RequestOptions,
    callback?: (res: IncomingMessage) => void,
  ): ClientRequest;
}
