// Bundle cytoscape + cytoscape-dagre into ONE file inside the Python package.
// The output is committed, so `pip install` needs no npm; rerun after changing versions:
//   cd web && npm ci && npm run build      (or: nox -s web)
import { build } from "esbuild";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const outfile = resolve(here, "../lineage_sdk/collector/api/static/graph-libs.js");

await build({
  entryPoints: [resolve(here, "src/vendor.mjs")],
  bundle: true,
  minify: true,
  format: "iife",
  target: ["es2019"],
  platform: "browser",
  legalComments: "eof", // keeps the MIT notices of cytoscape, dagre and graphlib in the bundle
  banner: {
    js: "/* lineage-sdk graph page libraries: cytoscape + cytoscape-dagre (MIT). Built by web/build.mjs; do not edit. */",
  },
  outfile,
  logLevel: "info",
});
