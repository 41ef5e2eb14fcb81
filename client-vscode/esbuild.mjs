// Bundles the extension into dist/extension.js (one CommonJS file, `vscode` external),
// and with --tests the unit tests into out/test/*.test.js for `node --test`.
import * as esbuild from "esbuild";
import { readdirSync } from "node:fs";

const tests = process.argv.includes("--tests");
const production = process.argv.includes("--production");

if (tests) {
  const entryPoints = readdirSync("test/unit")
    .filter((f) => f.endsWith(".test.ts"))
    .map((f) => `test/unit/${f}`);
  await esbuild.build({
    entryPoints,
    outdir: "out/test",
    bundle: true,
    platform: "node",
    format: "cjs",
    target: "node20",
    sourcemap: "inline",
    logLevel: "warning",
  });
} else {
  await esbuild.build({
    entryPoints: ["src/extension.ts"],
    outfile: "dist/extension.js",
    bundle: true,
    platform: "node",
    format: "cjs",
    target: "node20",
    external: ["vscode"],
    minify: production,
    sourcemap: !production,
    legalComments: "none",
    logLevel: "warning",
  });
}
