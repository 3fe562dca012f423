// The lineage graph page. Plain browser JavaScript, no build step: cytoscape (+ dagre) comes from
// graph-libs.js beside this file. Names in lineage are arbitrary text written by anyone who can
// send an event, so every piece of data reaches the page through textContent, form values or
// the canvas; nothing here ever parses data as HTML or builds markup from it.
(function () {
  "use strict";

  var cytoscape = window.cytoscape;
  var state = { cy: null, apiKey: null, rootId: null, graph: null, byId: {} };
  var $ = function (id) { return document.getElementById(id); };

  // ---- small DOM helpers (text only) --------------------------------------------------------

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }

  function setStatus(text, isError) {
    var status = $("status");
    status.textContent = text || "";
    status.className = isError ? "error" : "";
  }

  function shorten(text, max) {
    return text.length > max ? text.slice(0, max - 1) + "\u2026" : text;
  }

  // ---- API ----------------------------------------------------------------------------------

  function apiGet(path, params) {
    var query = params ? "?" + new URLSearchParams(params).toString() : "";
    var headers = { Accept: "application/json" };
    if (state.apiKey) headers["X-API-Key"] = state.apiKey;
    return fetch("api/v1/" + path + query, { headers: headers, credentials: "same-origin" })
      .then(function (response) {
        return response.json().catch(function () { return {}; }).then(function (body) {
          if (response.status === 401) {
            $("key-box").hidden = false;
          }
          if (!response.ok) {
            var detail = body && typeof body.detail === "string" ? body.detail : response.statusText;
            var error = new Error(detail);
            error.status = response.status;
            throw error;
          }
          return body;
        });
      });
  }

  function seg(text) {
    return encodeURIComponent(text);
  }

  // ---- URL state ----------------------------------------------------------------------------

  function readHash() {
    var params = new URLSearchParams(location.hash.replace(/^#/, ""));
    var depth = parseInt(params.get("depth") || "3", 10);
    return {
      nodeId: params.get("nodeId") || "",
      depth: isFinite(depth) ? Math.max(0, Math.min(100, depth)) : 3,
      direction: ["both", "upstream", "downstream"].indexOf(params.get("direction")) >= 0
        ? params.get("direction") : "both",
    };
  }

  function writeHash(choice) {
    var params = new URLSearchParams({
      nodeId: choice.nodeId, depth: String(choice.depth), direction: choice.direction,
    });
    var next = "#" + params.toString();
    if (location.hash !== next) history.replaceState(null, "", next);
  }

  function currentChoice() {
    return {
      nodeId: $("node-input").value.trim(),
      depth: Math.max(0, Math.min(100, parseInt($("depth-input").value || "0", 10) || 0)),
      direction: $("direction-input").value,
    };
  }

  // ---- graph --------------------------------------------------------------------------------

  function latestState(node) {
    var run = node.data && node.data.latestRun;
    return run && typeof run.state === "string" ? run.state : null;
  }

  function isFailed(node) {
    var s = latestState(node);
    return s === "FAILED" || s === "ABORTED";
  }

  function elementsOf(graph, rootId) {
    var elements = [];
    var seenEdges = {};
    graph.forEach(function (node) {
      var data = node.data || {};
      elements.push({
        group: "nodes",
        data: {
          id: node.id,
          type: node.type,
          label: shorten(String(data.name || node.id), 48),
        },
        classes: [
          node.type === "JOB" ? "job" : "dataset",
          isFailed(node) ? "failed" : "",
          node.id === rootId ? "root" : "",
        ].join(" ").trim(),
      });
    });
    graph.forEach(function (node) {
      (node.outEdges || []).forEach(function (edge) {
        var key = JSON.stringify([edge.origin, edge.destination]);
        if (seenEdges[key] || !state.byId[edge.origin] || !state.byId[edge.destination]) return;
        seenEdges[key] = true;
        elements.push({
          group: "edges",
          data: { id: "e:" + key, source: edge.origin, target: edge.destination },
        });
      });
    });
    return elements;
  }

  var graphStyle = [
    { selector: "node", style: {
      "label": "data(label)", "font-size": 11, "color": "#1d232a",
      "text-valign": "bottom", "text-margin-y": 4, "text-wrap": "ellipsis",
      "text-max-width": "180px", "width": 34, "height": 34, "border-width": 0,
    } },
    { selector: "node.job", style: {
      "shape": "round-rectangle", "background-color": "#2f6fbf", "width": 46, "height": 28,
    } },
    { selector: "node.dataset", style: { "shape": "ellipse", "background-color": "#2e8b57" } },
    { selector: "node.failed", style: { "border-width": 5, "border-color": "#d62828" } },
    { selector: "node.root", style: {
      "underlay-color": "#f4a259", "underlay-padding": 7, "underlay-opacity": 0.8,
      "font-weight": "bold",
    } },
    { selector: "node:selected", style: {
      "overlay-color": "#1d232a", "overlay-opacity": 0.15, "overlay-padding": 6,
    } },
    { selector: "edge", style: {
      "width": 1.6, "line-color": "#9aa5b1", "target-arrow-color": "#9aa5b1",
      "target-arrow-shape": "triangle", "curve-style": "bezier", "arrow-scale": 1.1,
    } },
  ];

  function draw(graph, rootId) {
    state.graph = graph;
    state.rootId = rootId;
    state.byId = {};
    graph.forEach(function (node) { state.byId[node.id] = node; });
    if (state.cy) state.cy.destroy();
    state.cy = cytoscape({
      container: $("graph"),
      elements: elementsOf(graph, rootId),
      style: graphStyle,
      layout: { name: "dagre", rankDir: "LR", nodeSep: 30, rankSep: 90, animate: false },
      minZoom: 0.05,
      maxZoom: 3,
    });
    state.cy.on("tap", "node", function (evt) {
      showDetails(evt.target.id());
    });
    state.cy.on("dbltap", "node", function (evt) {
      reroot(evt.target.id());
    });
    fillNodeList(graph);
    window.lineagePage.cy = state.cy;
  }

  function fillNodeList(graph) {
    var list = $("node-list");
    clear(list);
    graph.slice().sort(function (a, b) {
      return a.type === b.type ? (a.id < b.id ? -1 : 1) : (a.type === "JOB" ? -1 : 1);
    }).forEach(function (node) {
      var item = el("li");
      var button = el("button", "node-button");
      button.type = "button";
      button.dataset.nodeId = node.id;
      button.appendChild(el("span", "kind " + (node.type === "JOB" ? "JOB" : "DATASET"),
        node.type === "JOB" ? "job" : "dataset"));
      button.appendChild(document.createTextNode(String((node.data && node.data.name) || node.id)));
      if (isFailed(node)) button.appendChild(el("span", "state-FAILED", " \u2716 " + latestState(node)));
      button.addEventListener("click", function () {
        if (state.cy) {
          state.cy.elements().unselect();
          var target = state.cy.getElementById(node.id);
          target.select();
          state.cy.animate({ center: { eles: target } }, { duration: 200 });
        }
        showDetails(node.id);
      });
      item.appendChild(button);
      list.appendChild(item);
    });
  }

  // ---- details ------------------------------------------------------------------------------

  function addRow(dl, term, value, className) {
    dl.appendChild(el("dt", null, term));
    dl.appendChild(el("dd", className || null, value));
  }

  function fmtDuration(ms) {
    if (typeof ms !== "number") return "";
    if (ms < 1000) return ms + " ms";
    if (ms < 60000) return (ms / 1000).toFixed(1) + " s";
    return (ms / 60000).toFixed(1) + " min";
  }

  function showDetails(id) {
    var node = state.byId[id];
    var body = $("details-body");
    clear(body);
    if (!node) return;
    var data = node.data || {};
    var dl = el("dl", "node-details");
    dl.id = "node-details";
    addRow(dl, "type", node.type === "JOB" ? "job" : "dataset");
    addRow(dl, "namespace", data.namespace || "");
    addRow(dl, "name", data.name || "");
    addRow(dl, "node id", node.id);
    addRow(dl, "upstream", String((node.inEdges || []).length) + " edge(s)");
    addRow(dl, "downstream", String((node.outEdges || []).length) + " edge(s)");
    var s = latestState(node);
    if (s) addRow(dl, "latest run", s, "state-" + s);
    body.appendChild(dl);

    var recenter = el("button", "link-button", "\u21BB Show lineage around this node");
    recenter.type = "button";
    recenter.addEventListener("click", function () { reroot(node.id); });
    body.appendChild(recenter);

    if (node.type === "JOB") {
      var runsBox = el("div", "runs-box");
      runsBox.appendChild(el("h3", null, "Recent runs"));
      var list = el("ul", "runs");
      runsBox.appendChild(list);
      body.appendChild(runsBox);
      var path = "namespaces/" + seg(data.namespace) + "/jobs/" + seg(data.name) + "/runs";
      apiGet(path, { limit: "5" }).then(function (answer) {
        if (!answer.runs || !answer.runs.length) list.appendChild(el("li", null, "no runs"));
        (answer.runs || []).forEach(function (run) {
          var item = el("li");
          item.appendChild(el("span", "state-" + run.state, run.state));
          item.appendChild(document.createTextNode(
            " " + (run.startedAt || run.endedAt || "") + " " + fmtDuration(run.durationMs)));
          var show = el("button", "link-button", " events");
          show.type = "button";
          show.addEventListener("click", function () { showEvents(item, run.id); });
          item.appendChild(show);
          list.appendChild(item);
        });
      }).catch(function (error) {
        list.appendChild(el("li", "state-FAILED", "runs unavailable: " + error.message));
      });
    }
  }

  function showEvents(container, runId) {
    apiGet("jobs/runs/" + seg(runId) + "/events").then(function (answer) {
      var pre = el("pre", "event", JSON.stringify(answer.events, null, 2));
      container.appendChild(pre);
    }).catch(function (error) {
      container.appendChild(el("div", "state-FAILED", error.message));
    });
  }

  // ---- loading ------------------------------------------------------------------------------

  function reroot(id) {
    $("node-input").value = id;
    load(currentChoice());
  }

  function load(choice) {
    if (!choice.nodeId) {
      document.body.dataset.state = "empty";
      setStatus("Choose a job or dataset: type a name, or pick one from the list.");
      return browse();
    }
    writeHash(choice);
    document.body.dataset.state = "loading";
    setStatus("Loading lineage\u2026");
    return apiGet("lineage", {
      nodeId: choice.nodeId, depth: String(choice.depth), direction: choice.direction,
    }).then(function (answer) {
      draw(answer.graph || [], choice.nodeId);
      var count = (answer.graph || []).length;
      setStatus(count + " node(s) within depth " + choice.depth + " (" + choice.direction + ")");
      showDetails(choice.nodeId);
      document.body.dataset.state = "ready";
    }).catch(function (error) {
      setStatus("Cannot show " + choice.nodeId + ": " + error.message, true);
      document.body.dataset.state = "error";
    });
  }

  // Without a chosen node: list the jobs of every namespace, each one click away.
  function browse() {
    return apiGet("namespaces", { limit: "50" }).then(function (answer) {
      var namespaces = answer.namespaces || [];
      return Promise.all(namespaces.map(function (ns) {
        return apiGet("namespaces/" + seg(ns.name) + "/jobs", { limit: "100" })
          .then(function (jobs) { return jobs.jobs || []; })
          .catch(function () { return []; });
      }));
    }).then(function (lists) {
      var nodes = [];
      lists.forEach(function (jobs) {
        jobs.forEach(function (job) {
          nodes.push({ id: "job:" + job.namespace + ":" + job.name, type: "JOB", data: job });
        });
      });
      state.byId = {};
      nodes.forEach(function (node) { state.byId[node.id] = node; });
      fillNodeList(nodes);
      // In browse mode a click in the list opens that job's lineage.
      Array.prototype.forEach.call($("node-list").querySelectorAll("button"), function (button) {
        button.addEventListener("click", function () { reroot(button.dataset.nodeId); });
      });
      if (!nodes.length) setStatus("No lineage recorded yet.");
    }).catch(function (error) {
      setStatus("Cannot list namespaces: " + error.message, true);
    });
  }

  var suggestTimer = null;
  function suggest() {
    var text = $("node-input").value.trim();
    if (suggestTimer) clearTimeout(suggestTimer);
    if (text.length < 2 || /^(job|dataset):/.test(text)) return;
    suggestTimer = setTimeout(function () {
      apiGet("search", { q: text, limit: "20" }).then(function (answer) {
        var box = $("node-suggestions");
        clear(box);
        (answer.results || []).forEach(function (hit) {
          var option = document.createElement("option");
          option.value = hit.nodeId;
          box.appendChild(option);
        });
      }).catch(function () { /* suggestions are optional */ });
    }, 200);
  }

  // ---- wiring -------------------------------------------------------------------------------

  window.lineagePage = {
    cy: null,
    // For tests and scripts: where a node is drawn, in page (client) coordinates.
    nodeClientPosition: function (id) {
      if (!state.cy) return null;
      var node = state.cy.getElementById(id);
      if (!node || node.empty()) return null;
      var pos = node.renderedPosition();
      var box = $("graph").getBoundingClientRect();
      return { x: box.left + pos.x, y: box.top + pos.y };
    },
  };

  document.addEventListener("DOMContentLoaded", function () {
    if (typeof cytoscape !== "function") {
      setStatus("graph-libs.js did not load; reinstall the package.", true);
      document.body.dataset.state = "error";
      return;
    }
    var choice = readHash();
    $("node-input").value = choice.nodeId;
    $("depth-input").value = String(choice.depth);
    $("direction-input").value = choice.direction;
    $("controls").addEventListener("submit", function (evt) {
      evt.preventDefault();
      load(currentChoice());
    });
    $("node-input").addEventListener("input", suggest);
    $("key-input").addEventListener("change", function () {
      state.apiKey = $("key-input").value || null;
      load(currentChoice());
    });
    load(choice);
  });
})();
