// Builds the web client into dist/: the typed clients generated from ../protos with buf and
// protoc-gen-es (buf.gen.yaml), then one bundle of JS and one of CSS with esbuild, under hashed
// names, and dist/index.html naming them. `node build.mjs gen` only generates.
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const bin = (name) => join(here, "node_modules", ".bin", name);

execFileSync(bin("buf"), ["generate"], { cwd: here, stdio: "inherit" });
if (process.argv[2] === "gen") process.exit(0);
execFileSync(bin("tsc"), ["--noEmit", "-p", here], { stdio: "inherit" }); // esbuild strips types unchecked

const dist = join(here, "dist");
rmSync(dist, { recursive: true, force: true });
mkdirSync(join(dist, "assets"), { recursive: true });
const result = await esbuild.build({
  entryPoints: [join(here, "src", "main.ts"), join(here, "src", "style.css")],
  bundle: true,
  minify: true,
  format: "esm",
  target: ["es2022"],
  outdir: join(dist, "assets"),
  entryNames: "[name]-[hash]",
  metafile: true,
  legalComments: "none",
  logLevel: "warning",
});
const outs = Object.keys(result.metafile.outputs).map((p) => basename(p));
const js = outs.find((f) => f.endsWith(".js"));
const css = outs.find((f) => f.endsWith(".css"));
const html = readFileSync(join(here, "src", "index.html"), "utf8")
  .replace("{{js}}", `/assets/${js}`)
  .replace("{{css}}", `/assets/${css}`);
writeFileSync(join(dist, "index.html"), html);
console.log(`web/dist: index.html, assets/${js}, assets/${css}`);
