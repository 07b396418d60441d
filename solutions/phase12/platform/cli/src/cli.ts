// platformctl: the platform's command-line client (CLI.md is the contract).

import { call, TransportError } from "./client";

const USAGE = `usage: platformctl [--server URL] [--json] [--timeout SECONDS] <command>
commands:
  health
  jobs list [--state STATE]
  jobs submit NAME --gpus N [--priority P]
  jobs get ID
  jobs cancel ID
  nodes list
  nodes fail NAME
  generate --prompt-tokens N --max-tokens M
  license
`;

export const EXIT_OK = 0;
export const EXIT_SERVER = 1;
export const EXIT_USAGE = 2;

class UsageError extends Error {}

interface Request {
  method: string;
  path: string;
  body?: object;
  show: (answer: unknown) => string; // the table or line printed without --json
}

interface Parsed {
  server: string;
  json: boolean;
  timeoutS: number;
  help: boolean;
  words: string[]; // the command and its positional arguments
  options: Map<string, string>; // the command's --name value options
}

const GLOBAL_VALUED = new Set(["--server", "--timeout"]);
const COMMAND_VALUED = new Set(["--state", "--gpus", "--priority", "--prompt-tokens", "--max-tokens"]);

export function parseArgs(argv: string[], env: Record<string, string | undefined>): Parsed {
  const parsed: Parsed = {
    server: env.PLATFORM_URL || "http://127.0.0.1:8080",
    json: false,
    timeoutS: 10,
    help: false,
    words: [],
    options: new Map(),
  };
  for (let i = 0; i < argv.length; i++) {
    let arg = argv[i];
    let value: string | undefined;
    if (arg.startsWith("--") && arg.includes("=")) {
      value = arg.slice(arg.indexOf("=") + 1);
      arg = arg.slice(0, arg.indexOf("="));
    }
    if (arg === "--json" || arg === "--help") {
      if (value !== undefined) throw new UsageError(`${arg} takes no value`);
      if (arg === "--json") parsed.json = true;
      else parsed.help = true;
    } else if (GLOBAL_VALUED.has(arg) || COMMAND_VALUED.has(arg)) {
      if (value === undefined) {
        if (i + 1 >= argv.length) throw new UsageError(`${arg} needs a value`);
        value = argv[++i];
      }
      if (arg === "--server") parsed.server = value;
      else if (arg === "--timeout") {
        const t = Number(value);
        if (!/^\d+(\.\d+)?$/.test(value) || !(t > 0)) {
          throw new UsageError(`--timeout must be a positive number of seconds, not ${JSON.stringify(value)}`);
        }
        parsed.timeoutS = t;
      } else parsed.options.set(arg, value);
    } else if (arg.startsWith("--")) {
      throw new UsageError(`unknown option ${arg}`);
    } else {
      parsed.words.push(arg);
    }
  }
  return parsed;
}

function integer(options: Map<string, string>, name: string, required: boolean): number | undefined {
  const text = options.get(name);
  if (text === undefined) {
    if (required) throw new UsageError(`${name} is required`);
    return undefined;
  }
  const n = Number(text);
  if (!/^-?\d+$/.test(text) || !Number.isSafeInteger(n)) {
    throw new UsageError(`${name} must be an integer, not ${JSON.stringify(text)}`);
  }
  return n;
}

function segment(what: string, text: string): string {
  if (text === "" || text === "." || text === "..") {
    throw new UsageError(`${what} ${JSON.stringify(text)} is not a name`);
  }
  return encodeURIComponent(text);
}

function cell(v: unknown): string {
  return v === null || v === undefined || v === "" ? "-" : String(v);
}

function table(header: string[], rows: unknown[][]): string {
  const all = [header, ...rows.map((r) => r.map(cell))];
  const widths = header.map((_, c) => Math.max(...all.map((r) => r[c].length)));
  return all.map((r) => r.map((v, c) => v.padEnd(widths[c])).join("  ").trimEnd() + "\n").join("");
}

type Obj = Record<string, unknown>;

function jobsTable(jobs: Obj[]): string {
  return table(
    ["ID", "NAME", "GPUS", "PRIORITY", "STATE", "NODE", "ATTEMPTS"],
    jobs.map((j) => [j.id, j.name, j.gpus, j.priority, j.state, j.node, j.attempts]),
  );
}

function nodesTable(nodes: Obj[]): string {
  return table(
    ["NAME", "GPUS", "ALLOCATED", "STATE", "JOBS"],
    nodes.map((n) => [n.name, n.gpus, n.allocated, n.state, ((n.jobs as string[]) ?? []).join(",")]),
  );
}

function isoTime(seconds: unknown): string {
  return typeof seconds === "number" ? new Date(seconds * 1000).toISOString() : cell(seconds);
}

function expect(p: Parsed, count: number): void {
  if (p.words.length !== count) {
    throw new UsageError(`${p.words.slice(0, 2).join(" ")} takes ${count - 2 < 0 ? 0 : count - 2} argument(s)`);
  }
}

function allow(p: Parsed, names: string[]): void {
  for (const name of p.options.keys()) {
    if (!names.includes(name)) throw new UsageError(`${name} does not apply to ${p.words.slice(0, 2).join(" ")}`);
  }
}

export function request(p: Parsed): Request {
  const [command, sub] = p.words;
  if (command === "health") {
    expect(p, 1);
    allow(p, []);
    return { method: "GET", path: "/healthz", show: (a) => `${(a as Obj).status} ${(a as Obj).version}\n` };
  }
  if (command === "license") {
    expect(p, 1);
    allow(p, []);
    return {
      method: "GET",
      path: "/v1/license",
      show: (a) => {
        const l = a as Obj;
        const features = ((l.features as string[]) ?? []).join(",");
        return `state=${l.state} licensee=${l.licensee} features=${features || "-"} expires_at=${isoTime(l.expires_at)} grace_ends_at=${isoTime(l.grace_ends_at)}\n`;
      },
    };
  }
  if (command === "generate") {
    expect(p, 1);
    allow(p, ["--prompt-tokens", "--max-tokens"]);
    const body = {
      prompt_tokens: integer(p.options, "--prompt-tokens", true),
      max_tokens: integer(p.options, "--max-tokens", true),
    };
    return {
      method: "POST",
      path: "/v1/generate",
      body,
      show: (a) => `tokens=${(a as Obj).tokens} ttft_s=${(a as Obj).ttft_s} tpot_s=${(a as Obj).tpot_s}\n`,
    };
  }
  if (command === "jobs") {
    const one = (a: unknown) => jobsTable([a as Obj]);
    if (sub === "list") {
      expect(p, 2);
      allow(p, ["--state"]);
      const state = p.options.get("--state");
      const query = state === undefined ? "" : `?state=${encodeURIComponent(state)}`;
      return { method: "GET", path: `/v1/jobs${query}`, show: (a) => jobsTable(((a as Obj).jobs as Obj[]) ?? []) };
    }
    if (sub === "submit") {
      expect(p, 3);
      allow(p, ["--gpus", "--priority"]);
      const body: Obj = { name: p.words[2], gpus: integer(p.options, "--gpus", true) };
      const priority = integer(p.options, "--priority", false);
      if (priority !== undefined) body.priority = priority;
      return { method: "POST", path: "/v1/jobs", body, show: one };
    }
    if (sub === "get" || sub === "cancel") {
      expect(p, 3);
      allow(p, []);
      const path = `/v1/jobs/${segment("job id", p.words[2])}`;
      return { method: sub === "get" ? "GET" : "DELETE", path, show: one };
    }
  }
  if (command === "nodes") {
    if (sub === "list") {
      expect(p, 2);
      allow(p, []);
      return { method: "GET", path: "/v1/nodes", show: (a) => nodesTable(((a as Obj).nodes as Obj[]) ?? []) };
    }
    if (sub === "fail") {
      expect(p, 3);
      allow(p, []);
      const path = `/v1/nodes/${segment("node name", p.words[2])}/fail`;
      return { method: "POST", path, body: {}, show: (a) => nodesTable([a as Obj]) };
    }
  }
  throw new UsageError(p.words.length ? `unknown command ${p.words.slice(0, 2).join(" ")}` : "no command given");
}

export async function main(argv: string[]): Promise<number> {
  let parsed: Parsed;
  let req: Request;
  try {
    parsed = parseArgs(argv, process.env);
    if (parsed.help) {
      process.stdout.write(USAGE);
      return EXIT_OK;
    }
    req = request(parsed);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    process.stderr.write(`error: ${e.message}\n${USAGE}`);
    return EXIT_USAGE;
  }
  try {
    const answer = await call(parsed.server, req.method, req.path, req.body, parsed.timeoutS);
    if (answer.status < 200 || answer.status > 299) {
      const said = (answer.body as Obj | null)?.error;
      const sentence = typeof said === "string" ? said : JSON.stringify(answer.body);
      process.stderr.write(`error: ${sentence} (HTTP ${answer.status})\n`);
      return EXIT_SERVER;
    }
    process.stdout.write(parsed.json ? JSON.stringify(answer.body, null, 2) + "\n" : req.show(answer.body));
    return EXIT_OK;
  } catch (e) {
    if (!(e instanceof TransportError)) throw e;
    process.stderr.write(`error: ${e.message}\n`);
    return EXIT_SERVER;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (e) => {
    process.stderr.write(`platformctl crashed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exitCode = 70;
  },
);
