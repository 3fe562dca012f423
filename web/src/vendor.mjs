// The graph page's only third-party code: cytoscape with the dagre layout registered.
// Bundled by build.mjs into lineage_sdk/collector/api/static/graph-libs.js; the page reads it
// from window.cytoscape, so the page's own script (static/app.js) needs no build step.
import cytoscape from "cytoscape";
import dagre from "cytoscape-dagre";

cytoscape.use(dagre);
window.cytoscape = cytoscape;
