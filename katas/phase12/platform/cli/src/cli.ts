// platformctl: the platform's command-line client (CLI.md is the contract).

import { call, TransportError } from "./client";
import { todo } from "./todo";

export const EXIT_OK = 0;
export const EXIT_SERVER = 1;
export const EXIT_USAGE = 2;

// The whole program: parse argv (options may come anywhere), send the command's request with
// call(), print the answer (a table, or JSON with --json), and return the exit status.
export async function main(argv: string[]): Promise<number> {
  todo("cli.ts main(): parse the arguments, call the API, print the answer, return the exit status");
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
