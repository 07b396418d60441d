// Given: what a function you have not written yet calls. It ends the program at once with exit
// status 3 and a line the tests read as "not started" (not as a failure): replace each todo(...)
// with your code.

export function todo(what: string): never {
  process.stderr.write(`KATA-TODO: ${what}\n`);
  process.exit(3);
}
