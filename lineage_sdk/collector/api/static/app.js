// The lineage graph page. Plain browser JavaScript, no build step: cytoscape (+ dagre) comes from
// graph-libs.js beside this file. Names in lineage are arbitrary text written by anyone who can
// send an event, so every piece of data reaches the page through textContent, form values or
// the canvas; nothing here ever parses data as HTML or builds markup from it.
(function () {
  "use strict";

  var cytoscape = window.cytoscape;
  // Every graph read asks for at most this many nodes (the API's default too). An answer cut
  // there says `truncated: true`; a server that ignores `nodeLimit` is cut here, nearest first.
  var NODE_LIMIT = 1000;
  var state = {
    cy: null, apiKey: null, rootId: null, graph: null, byId: {},
    // What the URL records so a view can be shared: the graph asked for, the node whose details
    // are open and the field whose column lineage is shown.
    // asOf: "" for now, else the time the graph is drawn as of (as the API takes it).
    // expand: the nodes whose one-hop neighbourhood was added on click, in click order.
    // nodeLimit: the most nodes one answer may bring (the API's `nodeLimit`).
    // granularity: the view (job, dataset, run or parent; the API's `granularity`).
    // since, until: the time window ("" for open ends; until excluded), exclusive with asOf.
    choice: {
      nodeId: "", depth: 1, direction: "both", asOf: "", expand: [], nodeLimit: NODE_LIMIT,
      granularity: "job", since: "", until: "",
    },
    selected: "", field: "",
    // The first and last event time of the present graph, the time slider's ends.
    timeRange: null,
    // The present answer was cut at the node limit (by the server or by the page), and how
    // many nodes of the chosen view it left out (null when the server does not say).
    truncated: false, omitted: null,
    // Bumped by every load: an expansion answering after a reload is dropped.
    seq: 0, expanding: {},
    // Every neighbour any answer showed, drawn or not: id -> {up: {id: true}, down: {...}}.
    links: {}, listMarks: {}, looking: 0,
  };
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
    if (state.apiKey) headers.Authorization = "Bearer " + state.apiKey;
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
            error.reason = body && typeof body.reason === "string" ? body.reason : null;
            throw error;
          }
          return body;
        });
      });
  }

  // Which optional reads this server has, from its OpenAPI document, asked once: a route it
  // lacks is then never requested (no 404 in the console) and the page says what is missing.
  var capabilities = null;
  function serverHas() {
    if (!capabilities) {
      capabilities = fetch("openapi.json", { credentials: "same-origin" })
        .then(function (response) { return response.ok ? response.json() : {}; })
        .then(function (doc) {
          var paths = Object.keys((doc && doc.paths) || {});
          var has = function (re) { return paths.some(function (p) { return re.test(p); }); };
          if (!paths.length) return { dataset: true, columnLineage: true };
          return {
            dataset: has(/^\/api\/v1\/namespaces\/\{[^}]+\}\/datasets\/\{[^}]+\}$/),
            columnLineage: has(/^\/api\/v1\/column-lineage$/),
          };
        })
        .catch(function () { return { dataset: true, columnLineage: true }; });
    }
    return capabilities;
  }

  function seg(text) {
    return encodeURIComponent(text);
  }

  // ---- URL state ----------------------------------------------------------------------------

  function readHash() {
    var params = new URLSearchParams(location.hash.replace(/^#/, ""));
    // One hop by default: a wide neighbourhood is opened a node at a time (expand on click).
    var depth = parseInt(params.get("depth") || "1", 10);
    var limit = parseInt(params.get("nodeLimit") || String(NODE_LIMIT), 10);
    var expand = [];
    params.getAll("expand").forEach(function (id) {
      if (id && expand.indexOf(id) < 0) expand.push(id);
    });
    return {
      nodeId: params.get("nodeId") || "",
      depth: isFinite(depth) ? Math.max(0, Math.min(100, depth)) : 1,
      expand: expand,
      nodeLimit: isFinite(limit) && limit > 0 ? Math.min(limit, 100000) : NODE_LIMIT,
      direction: ["both", "upstream", "downstream"].indexOf(params.get("direction")) >= 0
        ? params.get("direction") : "both",
      selected: params.get("selected") || "",
      field: params.get("field") || "",
      asOf: isFinite(Date.parse(params.get("asOf") || "")) && !params.get("since") &&
        !params.get("until") ? params.get("asOf") : "",
      granularity: GRANULARITIES.indexOf(params.get("granularity")) >= 0
        ? params.get("granularity") : "job",
      // Sent as given: a window the API refuses (since after until) is said by its answer.
      since: isFinite(Date.parse(params.get("since") || "")) ? params.get("since") : "",
      until: isFinite(Date.parse(params.get("until") || "")) ? params.get("until") : "",
    };
  }

  function writeHash() {
    var choice = state.choice;
    var params = new URLSearchParams({
      nodeId: choice.nodeId, depth: String(choice.depth), direction: choice.direction,
    });
    if (state.selected && state.selected !== choice.nodeId) params.set("selected", state.selected);
    if (state.field) params.set("field", state.field);
    if (choice.granularity && choice.granularity !== "job") {
      params.set("granularity", choice.granularity);
    }
    if (choice.asOf) params.set("asOf", choice.asOf);
    if (choice.since) params.set("since", choice.since);
    if (choice.until) params.set("until", choice.until);
    (choice.expand || []).forEach(function (id) { params.append("expand", id); });
    if (choice.nodeLimit !== NODE_LIMIT) params.set("nodeLimit", String(choice.nodeLimit));
    var next = "#" + params.toString();
    if (location.hash !== next) history.replaceState(null, "", next);
  }

  // The view the controls ask for. Expansions belong to the chosen node: kept while it stays
  // (other depth, direction or time), dropped for another one.
  function currentChoice() {
    var nodeId = $("node-input").value.trim();
    return {
      nodeId: nodeId,
      depth: Math.max(0, Math.min(100, parseInt($("depth-input").value || "0", 10) || 0)),
      direction: $("direction-input").value,
      asOf: state.choice.asOf || "",
      expand: nodeId === state.choice.nodeId ? (state.choice.expand || []).slice() : [],
      nodeLimit: state.choice.nodeLimit || NODE_LIMIT,
      granularity: $("granularity-input").value,
      since: state.choice.since || "",
      until: state.choice.until || "",
    };
  }

  // ---- views and the time window --------------------------------------------------------------

  var GRANULARITIES = ["job", "dataset", "run", "parent"];
  var VIEW_NAMES = {
    job: "jobs and datasets", dataset: "datasets only", run: "runs and datasets",
    parent: "parent jobs",
  };

  function windowed(choice) {
    return !!(choice.since || choice.until);
  }

  // The lineage read's parameters for `nodeId` in the chosen view and time: asOf, or the
  // window (the API refuses both at once), and the granularity when not the default.
  function viewParams(choice, nodeId, depth) {
    var params = {
      nodeId: nodeId, depth: String(depth), direction: choice.direction,
      nodeLimit: String(choice.nodeLimit || NODE_LIMIT),
    };
    if (choice.granularity && choice.granularity !== "job") params.granularity = choice.granularity;
    // The page marks datasets whose last schema change broke: an opt-in read of the API's.
    if (!choice.granularity || choice.granularity === "job") params.marks = "schema";
    if (windowed(choice)) {
      if (choice.since) params.since = choice.since;
      if (choice.until) params.until = choice.until;
    } else if (choice.asOf) {
      params.asOf = choice.asOf;
    }
    return params;
  }

  // " as of …", " from … to …", " since …", " until …" or "" (now, all time).
  function whenText(choice) {
    if (choice.since && choice.until) {
      return " from " + fmtTime(choice.since) + " to " + fmtTime(choice.until) + " (excluded)";
    }
    if (choice.since) return " since " + fmtTime(choice.since);
    if (choice.until) return " until " + fmtTime(choice.until) + " (excluded)";
    return choice.asOf ? " as of " + fmtTime(choice.asOf) : "";
  }

  // A run's view starts at a dataset or a run (the API refuses a job there); a run node is a
  // root in the run view only. The switch says so instead of asking what the API refuses.
  function showViewChoices() {
    var nodeId = $("node-input").value.trim();
    var select = $("granularity-input");
    var hint = $("granularity-hint");
    var runOption = select.querySelector("option[value='run']");
    runOption.disabled = /^job:/.test(nodeId) && select.value !== "run";
    hint.hidden = !runOption.disabled;
    hint.textContent = runOption.disabled ? "runs: choose a dataset or a run" : "";
    runOption.title = runOption.disabled ? "The run view starts at a dataset or a run." : "";
  }

  // Redraw the same node in another view. Leaving the run view from a run goes to its job.
  function setGranularity(granularity) {
    var root = state.byId[state.choice.nodeId];
    var job = root && root.type === "RUN" && root.data && root.data.job;
    if (granularity !== "run" && /^run:/.test($("node-input").value.trim()) && job) {
      $("node-input").value = "job:" + job.namespace + ":" + job.name;
    }
    showViewChoices();
    var choice = currentChoice();
    choice.granularity = granularity;
    choice.expand = [];  // expansions were asked in the other view
    load(choice, choice.nodeId === state.choice.nodeId ? state.selected : "");
  }

  // Redraw the same view within [since, until) ("" for an open end); drops asOf.
  function setWindow(since, until) {
    var choice = currentChoice();
    choice.since = since;
    choice.until = until;
    if (since || until) choice.asOf = "";
    load(choice, state.selected);
  }

  function windowValue(id) {
    var text = $(id).value;
    if (!text) return "";
    var ms = Date.parse(text + "Z");
    return isFinite(ms) ? new Date(ms).toISOString() : "";
  }

  // ---- time slider --------------------------------------------------------------------------

  // The lineage graph carries no times, so the slider's ends come from its jobs' reads:
  // createdAt is a job's first event, updatedAt its last. At most 100 jobs are asked.
  var RANGE_JOBS = 100;

  function rangeKey(choice) {
    return [choice.nodeId, choice.depth, choice.direction].join("\u0000");
  }

  // [ms, text] pairs; the text is sent back unchanged so the slider's ends ask for exactly the
  // first and the last event (sub-millisecond digits included).
  function jobTimes(graph) {
    var jobs = graph.filter(function (n) { return n.type === "JOB" && n.data; }).slice(0, RANGE_JOBS);
    return Promise.all(jobs.map(function (node) {
      var path = "namespaces/" + seg(node.data.namespace) + "/jobs/" + seg(node.data.name);
      return apiGet(path).catch(function () { return {}; });
    })).then(function (reads) {
      var times = [];
      reads.forEach(function (job) {
        [job.createdAt, job.updatedAt].forEach(function (text) {
          var ms = typeof text === "string" ? Date.parse(text) : NaN;
          if (isFinite(ms)) times.push([ms, text]);
        });
      });
      return times;
    });
  }

  // The slider's ends for `choice`, from the present graph of jobs and datasets (`graph`, or
  // asked for when null: for a past time, a window or another view).
  function timeRange(choice, graph) {
    var key = rangeKey(choice);
    if (/^run:/.test(choice.nodeId)) return Promise.resolve(null);  // no job view around a run
    if (!graph && state.timeRange && state.timeRange.key === key) return Promise.resolve(state.timeRange);
    var present = graph ? Promise.resolve(graph) : apiGet("lineage", {
      nodeId: choice.nodeId, depth: String(choice.depth), direction: choice.direction,
      nodeLimit: String(choice.nodeLimit || NODE_LIMIT),
    }).then(function (answer) { return answer.graph || []; });
    return present.then(jobTimes).then(function (times) {
      if (!times.length) return null;
      var first = times[0];
      var last = times[0];
      times.forEach(function (t) {
        if (t[0] < first[0]) first = t;
        if (t[0] > last[0]) last = t;
      });
      return { key: key, min: first[0], max: last[0], minText: first[1], maxText: last[1] };
    }).catch(function () { return null; });
  }

  // Datetime inputs hold UTC here ("YYYY-MM-DDTHH:MM:SS.mmm"), so a link means the same anywhere.
  function toInputValue(ms) {
    return new Date(ms).toISOString().slice(0, 23);
  }

  function showTime() {
    var range = state.timeRange;
    var slider = $("asof-range");
    var asOf = state.choice.asOf;
    var windowOn = windowed(state.choice);
    // asOf and the window are exclusive: with a window the slider rests.
    slider.disabled = !range || range.min === range.max || windowOn;
    $("asof-input").disabled = windowOn;
    if (range) {
      slider.min = String(range.min);
      slider.max = String(range.max);
    }
    var at = asOf ? Date.parse(asOf) : (range ? range.max : NaN);
    if (isFinite(at)) {
      if (range) slider.value = String(Math.max(range.min, Math.min(range.max, at)));
      $("asof-input").value = asOf ? toInputValue(at) : "";
    }
    $("asof-now").disabled = !asOf;
    document.body.classList.toggle("past", !!asOf);
    [["since-input", state.choice.since], ["until-input", state.choice.until]].forEach(function (p) {
      var input = $(p[0]);
      var ms = p[1] ? Date.parse(p[1]) : NaN;
      input.value = isFinite(ms) ? toInputValue(ms).slice(0, 19) : "";
      // The first and last event of the present graph bound the pickers (typing may go beyond).
      input.min = range ? toInputValue(range.min - 1000).slice(0, 19) : "";
      input.max = range ? toInputValue(range.max + 1000).slice(0, 19) : "";
    });
    $("window-clear").disabled = !windowOn;
    document.body.classList.toggle("windowed", windowOn);
  }

  // Redraw the same graph as of `asOf` ("" for now), keeping the open details where they exist.
  function setAsOf(asOf) {
    var choice = currentChoice();
    choice.asOf = asOf;
    if (asOf) choice.since = choice.until = "";  // a point in time replaces a window
    load(choice, state.selected);
  }

  function asOfFromSlider() {
    var range = state.timeRange;
    var ms = parseInt($("asof-range").value, 10);
    if (!range || !isFinite(ms)) return "";
    if (ms <= range.min) return range.minText;
    if (ms >= range.max) return range.maxText;
    return new Date(ms).toISOString();
  }

  // ---- graph --------------------------------------------------------------------------------

  // A running run whose heartbeats stopped reads STALE here: the API keeps Marquez's state
  // (RUNNING) and says so in its own `liveness` field.
  // A run node's state as the run lists say it (Marquez's words), whether the view sends those
  // or OpenLineage's event types (COMPLETE, FAIL, …).
  var RUN_STATES = { START: "RUNNING", RUNNING: "RUNNING", COMPLETE: "COMPLETED", FAIL: "FAILED",
    ABORT: "ABORTED" };

  function latestState(node) {
    if (node.type === "RUN") {
      var raw = node.data && typeof node.data.state === "string" ? node.data.state : null;
      return raw && RUN_STATES[raw] ? RUN_STATES[raw] : raw;
    }
    var run = node.data && node.data.latestRun;
    if (run && run.liveness === "STALE") return "STALE";
    return run && typeof run.state === "string" ? run.state : null;
  }

  function isFailed(node) {
    var s = latestState(node);
    return s === "FAILED" || s === "ABORTED" || s === "STALE";
  }

  // A dataset whose latest dataQualityAssertions facet holds a failed assertion, or whose last
  // schema change removed a field or changed a type (lineage-sdk extensions of the answer).
  function qualityFailed(node) {
    return node.type === "DATASET" && !!(node.data && node.data.qualityFailed === true);
  }

  function schemaBroke(node) {
    return node.type === "DATASET" && !!(node.data && node.data.schemaBreaking === true);
  }

  // A node's kind: "job", "dataset" or "run" (its class in the graph, its word in the list).
  function kindOf(node) {
    return node.type === "JOB" ? "job" : node.type === "RUN" ? "run" : "dataset";
  }

  // The child jobs a parent view folded into this job (`data.children`).
  function childrenOf(node) {
    var children = node.data && node.data.children;
    return (Array.isArray(children) ? children : []).filter(function (c) {
      return c && typeof c.name === "string";
    });
  }

  // A run is named by its job, then its state and start: "load\nCOMPLETED\n2025-03-01 00:00:10".
  function runLabel(data) {
    var job = data.job || {};
    var when = fmtTime(data.startedAt || data.endedAt || "").replace(/ UTC$/, "");
    return [shorten(String(job.name || data.runId || ""), 40),
      String(RUN_STATES[data.state] || data.state || "run"), when].filter(Boolean).join("\n");
  }

  // Ranks and nodes further apart where labels are longer (a run's three lines).
  function rankSep() {
    return state.choice.granularity === "run" ? 150 : 90;
  }

  function nodeSep() {
    return state.choice.granularity === "run" ? 55 : 30;
  }

  function nodeElement(node, rootId) {
    var data = node.data || {};
    var job = node.type === "RUN" ? data.job || {} : data;
    var folded = childrenOf(node).length;
    return {
      group: "nodes",
      data: {
        id: node.id,
        type: node.type,
        name: String(job.name || node.id),
        namespace: String(job.namespace || ""),
        // Name, then namespace: two datasets of one name in two systems must not look alike.
        label: node.type === "RUN" ? runLabel(data) : shorten(String(data.name || node.id), 40) +
          (data.namespace ? "\n" + shorten(String(data.namespace), 40) : "") +
          (folded ? "\n+" + plural(folded, "child job") : ""),
      },
      classes: [
        kindOf(node),
        folded ? "parent" : "",
        isFailed(node) ? "failed" : "",
        qualityFailed(node) ? "quality-failed" : "",
        schemaBroke(node) ? "schema-broke" : "",
        node.id === rootId ? "root" : "",
      ].join(" ").trim(),
    };
  }

  // The jobs a dataset view's edge stands for (`data.jobs`), as "namespace:name" texts.
  function edgeJobs(edge) {
    var jobs = edge.data && edge.data.jobs;
    return (Array.isArray(jobs) ? jobs : []).filter(function (j) {
      return j && typeof j.name === "string";
    });
  }

  function edgeLabel(edge) {
    var jobs = edgeJobs(edge);
    if (!jobs.length) return "";
    return shorten(String(jobs[0].name), 30) + (jobs.length > 1 ? " +" + (jobs.length - 1) : "");
  }

  function edgeKey(edge) {
    return JSON.stringify([edge.origin, edge.destination]);
  }

  // The edges between known nodes that `drawn` (keys already drawn) lacks; each node's in- and
  // out-edges both, so an edge is found from whichever end arrived first.
  function edgeElements(nodes, drawn) {
    var elements = [];
    nodes.forEach(function (node) {
      (node.inEdges || []).concat(node.outEdges || []).forEach(function (edge) {
        var key = edgeKey(edge);
        if (drawn[key] || !state.byId[edge.origin] || !state.byId[edge.destination]) return;
        drawn[key] = true;
        var parentLink = edge.data && edge.data.link === "parent";
        elements.push({
          group: "edges",
          data: {
            id: "e:" + key, source: edge.origin, target: edge.destination,
            // Dataset view: the jobs that made the edge, the first named on it.
            label: edgeLabel(edge), jobs: edgeJobs(edge).length,
          },
          // Declared by a JobEvent (static lineage), not seen in a run: drawn dashed. A parent
          // run's link to its child run (run view): dotted.
          classes: [edge.declared === true ? "declared" : "", parentLink ? "parent-link" : "",
            edgeJobs(edge).length ? "via-jobs" : ""].join(" ").trim(),
        });
      });
    });
    return elements;
  }

  function elementsOf(graph, rootId) {
    return graph.map(function (node) { return nodeElement(node, rootId); })
      .concat(edgeElements(graph, {}));
  }

  // ---- bounded reads: one hop, expand on click, the node limit ------------------------------

  // At most `limit` nodes of `answer`, nearest first from `rootId` (breadth first over the
  // answer's own edges), and whether it was cut: by the server (`truncated`, lineage-sdk's
  // extension) or here, for a server that does not know `nodeLimit`.
  function bounded(answer, rootId, limit) {
    var graph = answer.graph || [];
    var cut = answer.truncated === true;
    var omitted = typeof answer.omittedNodes === "number" ? answer.omittedNodes : null;
    if (graph.length <= limit) return { graph: graph, truncated: cut, omitted: omitted };
    var byId = {};
    graph.forEach(function (node) { byId[node.id] = node; });
    var kept = [];
    var seen = {};
    var queue = byId[rootId] ? [rootId] : [];
    if (queue.length) seen[rootId] = true;
    for (var i = 0; i < queue.length && kept.length < limit; i++) {
      var node = byId[queue[i]];
      kept.push(node);
      (node.inEdges || []).concat(node.outEdges || []).forEach(function (edge) {
        [edge.origin, edge.destination].forEach(function (id) {
          if (!seen[id] && byId[id]) {
            seen[id] = true;
            queue.push(id);
          }
        });
      });
    }
    return { graph: kept, truncated: true, omitted: (omitted || 0) + graph.length - kept.length };
  }

  // Add `nodes` to the present graph (state.graph / state.byId); a node already there gains the
  // edges it lacked. Answers the nodes that are new.
  function merge(nodes) {
    learn(nodes);
    var added = [];
    nodes.forEach(function (node) {
      var have = state.byId[node.id];
      if (!have) {
        state.byId[node.id] = node;
        state.graph.push(node);
        added.push(node);
        return;
      }
      ["inEdges", "outEdges"].forEach(function (side) {
        var keys = {};
        have[side] = (have[side] || []).slice();
        have[side].forEach(function (edge) { keys[edgeKey(edge)] = true; });
        (node[side] || []).forEach(function (edge) {
          if (!keys[edgeKey(edge)]) have[side].push(edge);
        });
      });
    });
    return added;
  }

  // Record the neighbours the edges of `nodes` show (an answer lists, on each node, its edges
  // to the other nodes of that answer).
  function learn(nodes) {
    var links = state.links;
    var at = function (id) { return links[id] || (links[id] = { up: {}, down: {} }); };
    nodes.forEach(function (node) {
      (node.inEdges || []).concat(node.outEdges || []).forEach(function (edge) {
        at(edge.origin).down[edge.destination] = true;
        at(edge.destination).up[edge.origin] = true;
      });
    });
  }

  // How many neighbours of `node` (in the view's direction) some answer showed that are not
  // drawn. A drawn answer's edges stop at its own nodes, so each view and expansion is also
  // asked one hop deeper (`lookahead`), not drawn, to learn what lies beyond its edge.
  function hiddenNeighbours(node) {
    var direction = state.choice.direction;
    var link = state.links[node.id];
    if (!link) return 0;
    var ids = {};
    if (direction !== "downstream") Object.keys(link.up).forEach(function (id) { ids[id] = true; });
    if (direction !== "upstream") Object.keys(link.down).forEach(function (id) { ids[id] = true; });
    return Object.keys(ids).filter(function (id) { return !state.byId[id]; }).length;
  }

  // The view (or an expansion) around `id` one hop deeper than drawn, only to learn which drawn
  // nodes have neighbours beyond; asked after the drawing, never waited for.
  function lookahead(id, depth) {
    var seq = state.seq;
    var params = expandParams(id);
    params.depth = String(depth + 1);
    state.looking += 1;
    document.body.dataset.lookahead = "pending";
    return apiGet("lineage", params).then(function (answer) {
      if (seq !== state.seq) return;
      learn(answer.graph || []);
      markMore();
    }).catch(function () { /* the outline is a hint; without it a click still expands */ })
      .then(function () {
        if (seq !== state.seq) return;
        state.looking -= 1;
        // For scripts and tests: "done" once every outline is known.
        if (!state.looking) document.body.dataset.lookahead = "done";
      });
  }

  // Mark the nodes with neighbours not drawn yet ("more": a dashed orange outline).
  function markMore() {
    if (!state.cy) return;
    state.cy.batch(function () {
      state.cy.nodes().forEach(function (n) {
        var node = state.byId[n.id()];
        var more = node ? hiddenNeighbours(node) : 0;
        n.data("more", more);
        if (more) n.addClass("more");
        else n.removeClass("more");
        var mark = state.listMarks[n.id()];
        if (mark) mark.textContent = more ? " +" + more : "";
      });
    });
    if (state.selected && state.byId[state.selected]) showExpand(state.byId[state.selected]);
  }

  // Any drawn node not expanded yet: the outline shows only the neighbours some answer
  // revealed (a sibling reached through a shared dataset shows up only when it is expanded).
  function canExpand(id) {
    // The chosen node's own hop is the view itself (unless the depth is 0).
    var shown = id === state.rootId && state.choice.depth > 0;
    return !!state.byId[id] && !shown &&
      (state.choice.expand || []).indexOf(id) < 0 && !state.expanding[id];
  }

  function expandParams(id) {
    return viewParams(state.choice, id, 1);
  }

  // One expansion's answer, cut to the limit; a node unknown at that time adds nothing.
  function fetchHop(id) {
    return apiGet("lineage", expandParams(id)).then(function (answer) {
      return bounded(answer, id, state.choice.nodeLimit || NODE_LIMIT);
    }).catch(function (error) {
      if (error.status === 404) return { graph: [], truncated: false };
      throw error;
    });
  }

  // Add one hop around `id` to the drawn graph: its new neighbours are laid out beside it and
  // nothing already drawn moves. Remembered in the URL (`expand`), so a reload draws the same.
  function expand(id) {
    if (!canExpand(id)) return Promise.resolve();
    var seq = state.seq;
    state.expanding[id] = true;
    document.body.dataset.state = "loading";
    setStatus("Expanding " + id + "\u2026");
    return fetchHop(id).then(function (hop) {
      if (seq !== state.seq) return;
      var added = merge(hop.graph);
      state.choice.expand = (state.choice.expand || []).concat([id]);
      state.truncated = state.truncated || hop.truncated;
      writeHash();
      var cy = state.cy;
      var drawn = {};
      cy.edges().forEach(function (e) { drawn[e.id().slice(2)] = true; });
      cy.batch(function () {
        cy.add(added.map(function (node) { return nodeElement(node, state.rootId); }));
        cy.add(edgeElements(state.graph, drawn));
      });
      placeBeside(id, added.map(function (node) { return node.id; }));
      markMore();
      lookahead(id, 1);
      fillNodeList(state.graph);
      showCount(added.length + " node(s) added around " + id + ". ");
      document.body.dataset.state = "ready";
    }).catch(function (error) {
      if (seq !== state.seq) return;
      setStatus("Cannot expand " + id + ": " + error.message, true);
      document.body.dataset.state = "ready";
    }).then(function () {
      delete state.expanding[id];
    });
  }

  // Lay out `ids` (just added) with dagre beside the node they were expanded from, which stays
  // where it was, as does everything else; the new block moves up or down until it covers no
  // node already drawn. dagre cannot pin nodes, so it lays out the new part alone.
  function placeBeside(anchorId, ids) {
    var cy = state.cy;
    var anchor = cy.getElementById(anchorId);
    if (!ids.length || anchor.empty()) return;
    var added = cy.collection();
    ids.forEach(function (id) { added = added.union(cy.getElementById(id)); });
    var part = added.union(anchor);
    var before = { x: anchor.position("x"), y: anchor.position("y") };
    var others = cy.nodes().difference(part);
    part.union(part.edgesWith(part)).layout({
      name: "dagre", rankDir: "LR", nodeSep: nodeSep(), rankSep: rankSep(), animate: false,
      fit: false,
    }).run();
    var dx = before.x - anchor.position("x");
    var dy = before.y - anchor.position("y");
    anchor.position(before);
    var box = added.boundingBox();
    var covers = function (shift) {
      var x1 = box.x1 + dx - 20, x2 = box.x2 + dx + 20;
      var y1 = box.y1 + dy + shift - 20, y2 = box.y2 + dy + shift + 20;
      return others.some(function (n) {
        var p = n.position();
        return p.x >= x1 && p.x <= x2 && p.y >= y1 && p.y <= y2;
      });
    };
    var step = box.h + 60;
    var shift = 0;
    for (var k = 1; k <= 40 && covers(shift); k++) {
      shift = (k % 2 ? 1 : -1) * Math.ceil(k / 2) * step;
    }
    if (covers(shift)) shift = 0;
    added.positions(function (n) {
      return { x: n.position("x") + dx, y: n.position("y") + dy + shift };
    });
    var view = cy.extent();
    var bb = part.boundingBox();
    if (bb.x1 < view.x1 || bb.x2 > view.x2 || bb.y1 < view.y1 || bb.y2 > view.y2) {
      cy.fit(cy.elements(), 30);
    }
  }

  // "N node(s)…" and, when an answer was cut at the node limit, the notice saying so.
  function showCount(prefix) {
    var choice = state.choice;
    var count = state.graph ? state.graph.length : 0;
    var when = whenText(choice);
    var expanded = (choice.expand || []).length;
    var view = choice.granularity && choice.granularity !== "job"
      ? ", " + VIEW_NAMES[choice.granularity] : "";
    setStatus((prefix || "") + count + " node(s) within depth " + choice.depth + " (" +
      choice.direction + view + ")" + (expanded ? ", " + expanded + " node(s) expanded" : "") +
      when);
    $("collapse").disabled = !expanded;
    var notice = $("truncated-notice");
    notice.hidden = !state.truncated;
    var omitted = state.omitted;
    notice.textContent = state.truncated
      ? "Showing " + count + " nodes; the neighbourhood was cut at the node limit (" +
        (choice.nodeLimit || NODE_LIMIT) + " per answer)" +
        (omitted ? ": " + plural(omitted, "node") + " of the view left out" : "") +
        " \u2014 expand nodes to see more."
      : "";
  }

  var graphStyle = [
    { selector: "node", style: {
      "label": "data(label)", "font-size": 11, "color": "#1d232a",
      "text-valign": "bottom", "text-margin-y": 4, "text-wrap": "wrap",
      "text-max-width": "260px", "line-height": 1.25, "width": 34, "height": 34,
      "border-width": 0,
      // Zoomed out over hundreds of nodes, labels too small to read are not drawn.
      "min-zoomed-font-size": 6,
    } },
    { selector: "node.job", style: {
      "shape": "round-rectangle", "background-color": "#2f6fbf", "width": 46, "height": 28,
    } },
    { selector: "node.dataset", style: { "shape": "ellipse", "background-color": "#2e8b57" } },
    { selector: "node.run", style: {
      "shape": "hexagon", "background-color": "#a0522d", "width": 40, "height": 30,
    } },
    { selector: "node.parent", style: {
      "border-width": 4, "border-style": "double", "border-color": "#163e6e",
    } },
    { selector: "node.failed", style: { "border-width": 5, "border-color": "#d62828" } },
    { selector: "node.quality-failed", style: { "border-width": 5, "border-color": "#e67e00" } },
    { selector: "node.schema-broke", style: {
      "border-width": 5, "border-style": "dashed", "border-color": "#d62828",
    } },
    // Neighbours not drawn yet: a click adds them.
    { selector: "node.more", style: {
      "outline-width": 3, "outline-color": "#7b2cbf", "outline-style": "dashed",
      "outline-offset": 3,
    } },
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
    { selector: "edge.declared", style: { "line-style": "dashed" } },
    { selector: "edge.parent-link", style: {
      "line-style": "dotted", "line-color": "#a0522d", "target-arrow-color": "#a0522d",
    } },
    { selector: "edge.via-jobs", style: {
      "label": "data(label)", "font-size": 9, "color": "#5c6670", "text-rotation": "autorotate",
      "text-background-color": "#ffffff", "text-background-opacity": 0.85,
      "text-background-padding": 1, "min-zoomed-font-size": 7,
    } },
    { selector: "edge:selected", style: {
      "line-color": "#1d232a", "target-arrow-color": "#1d232a", "width": 2.6,
    } },
  ];

  function draw(graph, rootId) {
    state.graph = graph;
    state.rootId = rootId;
    state.byId = {};
    graph.forEach(function (node) { state.byId[node.id] = node; });
    if (state.cy) state.cy.destroy();
    var large = graph.length > 300;
    state.cy = cytoscape({
      container: $("graph"),
      elements: elementsOf(graph, rootId),
      style: graphStyle,
      layout: {
        name: "dagre", rankDir: "LR", nodeSep: nodeSep(), rankSep: rankSep(), animate: false,
      },
      minZoom: 0.02,
      maxZoom: 3,
      // A big graph pans and zooms as a picture, edges hidden while it moves.
      textureOnViewport: large,
      hideEdgesOnViewport: large,
    });
    // A click selects the node (details beside the graph) and adds one hop around it, once:
    // one gesture, invited by the dashed outline of nodes known to have more.
    state.cy.on("tap", "node", function (evt) {
      var id = evt.target.id();
      state.field = "";
      showDetails(id);
      if (canExpand(id)) expand(id);
    });
    // An edge opens what it stands for (the jobs of a dataset view's edge).
    state.cy.on("tap", "edge", function (evt) {
      showEdgeDetails(evt.target.source().id(), evt.target.target().id());
    });
    markMore();
    fillNodeList(graph);
    // The legend names what this view draws.
    Array.prototype.forEach.call(document.querySelectorAll("#legend li[data-view]"), function (li) {
      li.hidden = li.dataset.view !== state.choice.granularity;
    });
    window.lineagePage.cy = state.cy;
    $("export-png").disabled = false;
    $("export-svg").disabled = false;
  }

  function selectInGraph(id) {
    if (!state.cy) return;
    state.cy.elements().unselect();
    var target = state.cy.getElementById(id);
    if (target.nonempty()) target.select();
  }

  function fillNodeList(graph) {
    var list = $("node-list");
    clear(list);
    state.listMarks = {};
    var order = { JOB: 0, RUN: 1 };
    var rank = function (node) { return node.type in order ? order[node.type] : 2; };
    graph.slice().sort(function (a, b) {
      return a.type === b.type ? (a.id < b.id ? -1 : 1) : rank(a) - rank(b);
    }).forEach(function (node) {
      var item = el("li");
      var button = el("button", "node-button");
      button.type = "button";
      button.dataset.nodeId = node.id;
      var kind = kindOf(node);
      button.appendChild(el("span", "kind " + kind.toUpperCase(), kind));
      var named = node.type === "RUN" ? (node.data && node.data.job) || {} : node.data || {};
      button.appendChild(document.createTextNode(String(named.name || node.id)));
      if (named.namespace) {
        button.appendChild(el("span", "ns", " " + named.namespace));
      }
      if (node.type === "RUN" && !isFailed(node) && latestState(node)) {
        button.appendChild(el("span", "state-" + latestState(node), " " + latestState(node)));
      }
      if (isFailed(node)) {
        button.appendChild(el("span", "state-" + latestState(node), " \u2716 " + latestState(node)));
      }
      var more = state.cy ? hiddenNeighbours(node) : 0;
      state.listMarks[node.id] = button.appendChild(el("span", "more", more ? " +" + more : ""));
      button.addEventListener("click", function () {
        if (state.cy && state.cy.getElementById(node.id).nonempty()) {
          state.cy.animate({ center: { eles: state.cy.getElementById(node.id) } },
            { duration: 200 });
        }
        state.field = "";
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

  // 850 ms, 1.2 s, 2 min 5 s, 1 h 3 min: a run list is read at a glance.
  function fmtDuration(ms) {
    if (typeof ms !== "number" || !isFinite(ms) || ms < 0) return "";
    if (ms < 1000) return Math.round(ms) + " ms";
    if (ms < 60000) return (ms / 1000).toFixed(1) + " s";
    var minutes = Math.floor(ms / 60000);
    if (minutes < 60) return minutes + " min " + Math.round((ms % 60000) / 1000) + " s";
    return Math.floor(minutes / 60) + " h " + (minutes % 60) + " min";
  }

  // "2025-03-01T00:01:05.123Z" -> "2025-03-01 00:01:05 UTC"
  function fmtTime(text) {
    if (typeof text !== "string" || !text) return "";
    var match = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})(?:\.\d+)?(Z|[+-]\d{2}:?\d{2})?$/.exec(text);
    if (!match) return text;
    return match[1] + " " + match[2] + (match[3] === "Z" || !match[3] ? " UTC" : " " + match[3]);
  }

  function plural(count, word) {
    return count + " " + word + (count === 1 ? "" : "s");
  }

  function showDetails(id) {
    var node = state.byId[id];
    var body = $("details-body");
    clear(body);
    if (!node) return;
    state.selected = id;
    selectInGraph(id);
    if (state.choice.nodeId) writeHash();
    var data = node.data || {};
    var dl = el("dl", "node-details");
    dl.id = "node-details";
    if (node.type === "RUN") return showRunDetails(node, body, dl);
    addRow(dl, "type", kindOf(node));
    addRow(dl, "namespace", data.namespace || "");
    addRow(dl, "name", data.name || "");
    addRow(dl, "node id", node.id);
    if (data.parentJobName) addRow(dl, "parent job", data.parentJobName);
    if (data.sourceName) addRow(dl, "source", data.sourceName);
    addRow(dl, "upstream", String((node.inEdges || []).length) + " edge(s)");
    addRow(dl, "downstream", String((node.outEdges || []).length) + " edge(s)");
    var s = latestState(node);
    if (s) addRow(dl, "latest run", s, "state-" + s);
    if (qualityFailed(node)) addRow(dl, "quality checks", "FAILED", "state-FAILED");
    if (schemaBroke(node)) {
      addRow(dl, "schema", "last change removed or retyped a field", "state-FAILED");
    }
    body.appendChild(dl);

    var expandBox = body.appendChild(el("div", "expand-box"));
    expandBox.id = "expand-box";
    showExpand(node);

    var recenter = el("button", "link-button", "\u21BB Show lineage around this node");
    recenter.type = "button";
    recenter.addEventListener("click", function () { reroot(node.id); });
    body.appendChild(recenter);

    if (childrenOf(node).length) showChildren(node, body);
    if (hasEdgeJobs(node)) showEdgeJobs(node, body);
    if (node.type === "JOB") showRuns(node, body);
    else {
      showFields(node, body);
      showSchemaDiff(node, body);
    }
  }

  // The dataset's versions (newest first), two of them chosen, and what changed between them:
  // fields added, removed and retyped.
  function showSchemaDiff(node, body) {
    var data = node.data || {};
    var box = el("div", "schema-diff");
    box.id = "schema-diff";
    box.appendChild(el("h3", null, "Schema changes"));
    var note = el("p", "hint", "Loading versions\u2026");
    box.appendChild(note);
    body.appendChild(box);
    var path = "namespaces/" + seg(data.namespace) + "/datasets/" + seg(data.name) + "/versions";
    apiGet(path, { limit: "50" }).then(function (answer) {
      if (state.selected !== node.id) return;
      var versions = (answer.versions || []).filter(function (v) {
        return v && typeof v.version === "string";
      });
      if (versions.length < 2) {
        note.textContent = versions.length ? "Only one version is recorded." :
          "No versions are recorded.";
        return;
      }
      note.textContent = "Choose two versions to compare their fields.";
      var pick = function (id, label, chosen) {
        var wrap = el("label", "diff-pick", label + " ");
        var select = el("select");
        select.id = id;
        wrap.htmlFor = id;
        versions.forEach(function (v, i) {
          var option = el("option", null, fmtTime(v.createdAt || "") + " \u00b7 " +
            shorten(v.version, 12));
          option.value = String(i);
          select.appendChild(option);
        });
        select.value = String(chosen);
        wrap.appendChild(select);
        box.appendChild(wrap);
        return select;
      };
      var from = pick("diff-from", "from", 1);
      var to = pick("diff-to", "to", 0);
      var result = el("div");
      result.id = "schema-diff-result";
      box.appendChild(result);
      var render = function () {
        clear(result);
        var changes = schemaChanges(versions[Number(from.value)].fields,
          versions[Number(to.value)].fields);
        if (!changes.length) {
          result.appendChild(el("p", "hint", "No field was added, removed or retyped."));
          return;
        }
        var table = el("table", "diff");
        table.id = "schema-diff-table";
        var head = el("tr");
        ["field", "change", "from", "to"].forEach(function (h) {
          var th = el("th", null, h);
          th.scope = "col";
          head.appendChild(th);
        });
        table.appendChild(el("thead")).appendChild(head);
        var tbody = table.appendChild(el("tbody"));
        changes.forEach(function (c) {
          var row = el("tr", "change-" + c.change);
          [c.name, c.change, c.before, c.after].forEach(function (text) {
            row.appendChild(el("td", null, text));
          });
          tbody.appendChild(row);
        });
        result.appendChild(table);
      };
      from.addEventListener("change", render);
      to.addEventListener("change", render);
      render();
    }).catch(function (error) {
      note.textContent = "versions unavailable: " + error.message;
    });
  }

  // Fields added, removed and retyped from `before` to `after` (Marquez's field lists), by name.
  // A type stated on one side only, or changed in case alone (varchar, VARCHAR), is no change,
  // as the alerts' breaking_changes decides (watch/causes.py).
  function schemaChanges(before, after) {
    var old = {}, now = {}, changes = [];
    fieldList(before).forEach(function (f) { old[f.name] = f.type; });
    fieldList(after).forEach(function (f) { now[f.name] = f.type; });
    Object.keys(old).forEach(function (name) {
      if (!(name in now)) changes.push({ name: name, change: "removed", before: old[name], after: "" });
      else if (old[name] && now[name] && caseFold(old[name]) !== caseFold(now[name])) {
        changes.push({ name: name, change: "type", before: old[name], after: now[name] });
      }
    });
    Object.keys(now).forEach(function (name) {
      if (!(name in old)) changes.push({ name: name, change: "added", before: "", after: now[name] });
    });
    return changes.sort(function (a, b) { return a.name < b.name ? -1 : a.name > b.name ? 1 : 0; });
  }

  // Python's str.casefold, near enough for type names: upper then lower case folds "ß" to "ss".
  function caseFold(text) {
    return String(text).toUpperCase().toLowerCase();
  }

  // A run of the run view: its job, state, times and parent run, then its events on demand.
  function showRunDetails(node, body, dl) {
    var data = node.data || {};
    var job = data.job || {};
    addRow(dl, "type", "run");
    var s = latestState(node);
    if (s) addRow(dl, "state", s, "state-" + s);
    addRow(dl, "job namespace", job.namespace || "");
    addRow(dl, "job", job.name || "");
    addRow(dl, "run id", data.runId || node.id.replace(/^run:/, ""));
    addRow(dl, "started", fmtTime(data.startedAt) || "\u2014");
    addRow(dl, "ended", fmtTime(data.endedAt) || "\u2014");
    var took = Date.parse(data.endedAt) - Date.parse(data.startedAt);
    if (isFinite(took)) addRow(dl, "duration", fmtDuration(took), "duration");
    if (data.parentRunId) addRow(dl, "parent run", data.parentRunId);
    addRow(dl, "node id", node.id);
    addRow(dl, "read", plural((node.inEdges || []).filter(function (e) {
      return /^dataset:/.test(e.origin);
    }).length, "dataset"));
    addRow(dl, "wrote", plural((node.outEdges || []).filter(function (e) {
      return /^dataset:/.test(e.destination);
    }).length, "dataset"));
    body.appendChild(dl);

    var expandBox = body.appendChild(el("div", "expand-box"));
    expandBox.id = "expand-box";
    showExpand(node);
    var recenter = el("button", "link-button", "\u21BB Show the runs around this run");
    recenter.type = "button";
    recenter.addEventListener("click", function () { reroot(node.id); });
    body.appendChild(recenter);
    if (job.name) {
      body.appendChild(el("br"));
      var toJob = el("button", "link-button job-button", "\u21BB Show its job's lineage");
      toJob.type = "button";
      toJob.addEventListener("click", function () {
        $("granularity-input").value = "job";
        reroot("job:" + job.namespace + ":" + job.name);
      });
      body.appendChild(toJob);
    }
    var runsBox = el("div", "runs-box");
    runsBox.appendChild(el("h3", null, "Events"));
    var list = el("ul", "runs");
    list.appendChild(runItem({
      id: data.runId || node.id.replace(/^run:/, ""), state: s || "", startedAt: data.startedAt,
      endedAt: data.endedAt, durationMs: isFinite(took) ? took : null,
    }));
    runsBox.appendChild(list);
    body.appendChild(runsBox);
  }

  // The child jobs a parent view folded into this job; each opens in the view of jobs.
  function showChildren(node, body) {
    var children = childrenOf(node);
    var box = body.appendChild(el("div", "children-box"));
    box.appendChild(el("h3", null, "Child jobs (" + children.length + ")"));
    var list = el("ul", "children");
    list.id = "children";
    children.forEach(function (child) {
      var item = el("li");
      var id = "job:" + (child.namespace || "") + ":" + child.name;
      item.dataset.nodeId = id;
      var button = el("button", "link-button", child.name);
      button.type = "button";
      button.title = "Show the lineage of " + child.name + " (jobs and datasets)";
      button.addEventListener("click", function () {
        $("granularity-input").value = "job";
        reroot(id);
      });
      item.appendChild(button);
      item.appendChild(el("span", "ns", " " + String(child.namespace || "")));
      list.appendChild(item);
    });
    box.appendChild(list);
  }

  function hasEdgeJobs(node) {
    return (node.inEdges || []).concat(node.outEdges || []).some(function (e) {
      return edgeJobs(e).length > 0;
    });
  }

  function nodeName(id) {
    var node = state.byId[id];
    var data = (node && node.data) || {};
    return String(data.name || id);
  }

  // A dataset view's edges of this dataset, each with the jobs that made it: the same as the
  // edges' labels and panels, readable without the mouse.
  function showEdgeJobs(node, body) {
    var box = body.appendChild(el("div", "edges-box"));
    [["Comes from", "inEdges", "origin"], ["Feeds", "outEdges", "destination"]].forEach(function (p) {
      var edges = (node[p[1]] || []).filter(function (e) { return edgeJobs(e).length; });
      if (!edges.length) return;
      box.appendChild(el("h3", null, p[0]));
      var list = el("ul", "edge-jobs");
      list.id = p[1] === "inEdges" ? "edges-in" : "edges-out";
      edges.forEach(function (edge) {
        var item = el("li");
        item.dataset.nodeId = edge[p[2]];
        item.appendChild(document.createTextNode(nodeName(edge[p[2]])));
        item.appendChild(el("span", "via", " via " + edgeJobs(edge).map(function (j) {
          return j.name;
        }).join(", ")));
        list.appendChild(item);
      });
      box.appendChild(list);
    });
  }

  // An edge's panel: its ends and what it stands for (the jobs of a dataset view's edge, a
  // parent run's link, a declared edge).
  function showEdgeDetails(source, target) {
    var from = state.byId[source];
    var edge = ((from && from.outEdges) || []).filter(function (e) {
      return e.destination === target;
    })[0] || { origin: source, destination: target };
    var body = $("details-body");
    clear(body);
    var dl = el("dl", "edge-details");
    dl.id = "edge-details";
    addRow(dl, "type", "edge");
    addRow(dl, "from", nodeName(source));
    addRow(dl, "to", nodeName(target));
    if (edge.declared === true) addRow(dl, "declared", "by a job event (not seen in a run)");
    if (edge.data && edge.data.link === "parent") addRow(dl, "link", "parent run \u2192 child run");
    body.appendChild(dl);
    var jobs = edgeJobs(edge);
    if (!jobs.length) return;
    body.appendChild(el("h3", null, "Made by " + plural(jobs.length, "job")));
    var list = el("ul", "edge-jobs");
    list.id = "edge-jobs";
    jobs.forEach(function (job) {
      var item = el("li");
      var id = "job:" + (job.namespace || "") + ":" + job.name;
      item.dataset.nodeId = id;
      var button = el("button", "link-button", job.name);
      button.type = "button";
      button.title = "Show the lineage of " + job.name + " (jobs and datasets)";
      button.addEventListener("click", function () {
        $("granularity-input").value = "job";
        reroot(id);
      });
      item.appendChild(button);
      item.appendChild(el("span", "ns", " " + String(job.namespace || "")));
      list.appendChild(item);
    });
    body.appendChild(list);
  }

  // "N neighbours not drawn" and the button adding them, kept current as answers arrive.
  function showExpand(node) {
    var box = $("expand-box");
    if (!box || state.selected !== node.id) return;
    clear(box);
    var more = hiddenNeighbours(node);
    if (more) box.appendChild(el("p", "hint", plural(more, "neighbour") + " not drawn yet."));
    if (!canExpand(node.id)) return;
    var grow = el("button", "link-button expand-button", "+ Expand: add its neighbours");
    grow.type = "button";
    grow.addEventListener("click", function () { expand(node.id); });
    box.appendChild(grow);
  }

  function showRuns(node, body) {
    var data = node.data || {};
    var runsBox = el("div", "runs-box");
    runsBox.appendChild(el("h3", null, "Recent runs"));
    var list = el("ul", "runs");
    runsBox.appendChild(list);
    body.appendChild(runsBox);
    var path = "namespaces/" + seg(data.namespace) + "/jobs/" + seg(data.name) + "/runs";
    apiGet(path, { limit: "5" }).then(function (answer) {
      if (!answer.runs || !answer.runs.length) list.appendChild(el("li", null, "no runs"));
      (answer.runs || []).forEach(function (run) { list.appendChild(runItem(run)); });
    }).catch(function (error) {
      list.appendChild(el("li", "state-FAILED", "runs unavailable: " + error.message));
    });
  }

  // COMPLETED · 2025-03-01 00:01:05 UTC · 1.2 s · [3 events]
  function runItem(run) {
    var item = el("li", "run");
    item.dataset.runId = run.id;
    item.appendChild(el("span", "state-" + run.state, run.state));
    var when = fmtTime(run.startedAt || run.endedAt);
    if (when) item.appendChild(document.createTextNode(" \u00B7 " + when));
    var took = run.endedAt ? fmtDuration(run.durationMs) : (run.startedAt ? "running" : "");
    if (took) item.appendChild(el("span", "duration", " \u00B7 " + took));
    item.appendChild(document.createTextNode(" \u00B7 "));
    var show = el("button", "link-button events-button", "events");
    show.type = "button";
    show.setAttribute("aria-expanded", "false");
    item.appendChild(show);
    var events = null;
    apiGet("jobs/runs/" + seg(run.id) + "/events").then(function (answer) {
      events = answer.events || [];
      show.textContent = plural(events.length, "event");
    }).catch(function () { /* the button still fetches them on click */ });
    show.addEventListener("click", function () {
      var open = item.querySelector("pre.event");
      if (open) {
        item.removeChild(open);
        show.setAttribute("aria-expanded", "false");
        return;
      }
      var render = function (list) {
        item.appendChild(el("pre", "event", JSON.stringify(list, null, 2)));
        show.setAttribute("aria-expanded", "true");
      };
      if (events) return render(events);
      apiGet("jobs/runs/" + seg(run.id) + "/events").then(function (answer) {
        render(answer.events || []);
      }).catch(function (error) {
        item.appendChild(el("div", "state-FAILED", error.message));
      });
    });
    return item;
  }

  // ---- dataset fields and column lineage ---------------------------------------------------

  function fieldList(raw) {
    return (Array.isArray(raw) ? raw : []).filter(function (f) {
      return f && typeof f.name === "string";
    }).map(function (f) {
      return {
        name: f.name,
        type: typeof f.type === "string" ? f.type : "",
        description: typeof f.description === "string" ? f.description : "",
      };
    });
  }

  // Marquez's getDataset answers `fields` (from the schema facet). A server without that route
  // still has the events: the schema facet of the dataset in the latest run of a job next to it.
  function datasetFields(node) {
    var data = node.data || {};
    var path = "namespaces/" + seg(data.namespace) + "/datasets/" + seg(data.name);
    return serverHas().then(function (has) {
      if (!has.dataset) return fieldsFromEvents(node);
      return apiGet(path).then(function (dataset) {
        showOtherNames(node, dataset.otherNames);
        return fieldList(dataset.fields);
      }).catch(function (error) {
        if (error.status !== 404 && error.status !== 405) throw error;
        return fieldsFromEvents(node);
      });
    });
  }

  // A dataset's other names (its symlinks, names producers sent it under: the answer's
  // `otherNames`, a lineage-sdk extension), each a row of its details.
  function showOtherNames(node, names) {
    var dl = $("node-details");
    if (!dl || state.selected !== node.id || !Array.isArray(names)) return;
    names.forEach(function (n) {
      if (n && typeof n.name === "string") {
        addRow(dl, "also named", String(n.namespace || "") + ":" + n.name);
      }
    });
  }

  function fieldsFromEvents(node) {
    var data = node.data || {};
    var jobs = (node.inEdges || []).map(function (e) { return e.origin; })
      .concat((node.outEdges || []).map(function (e) { return e.destination; }))
      .map(function (id) { return state.byId[id]; })
      .filter(function (n) { return n && n.type === "JOB" && n.data; });
    // Producers first (their outputs carry the schema they wrote), then consumers; a few at most.
    var tryJob = function (i) {
      if (i >= Math.min(jobs.length, 4)) return Promise.resolve([]);
      return schemaFromLatestRun(jobs[i].data, data).then(function (fields) {
        return fields.length ? fields : tryJob(i + 1);
      });
    };
    return tryJob(0);
  }

  function schemaFromLatestRun(job, data) {
    var path = "namespaces/" + seg(job.namespace) + "/jobs/" + seg(job.name) + "/runs";
    return apiGet(path, { limit: "1" }).then(function (answer) {
      var run = (answer.runs || [])[0];
      if (!run) return [];
      return apiGet("jobs/runs/" + seg(run.id) + "/events").then(function (runEvents) {
        var events = (runEvents.events || []).slice().reverse();
        for (var i = 0; i < events.length; i++) {
          var datasets = (events[i].outputs || []).concat(events[i].inputs || []);
          for (var j = 0; j < datasets.length; j++) {
            var ds = datasets[j] || {};
            var schema = ds.facets && ds.facets.schema;
            if (ds.namespace === data.namespace && ds.name === data.name && schema) {
              return fieldList(schema.fields);
            }
          }
        }
        return [];
      });
    });
  }

  function showFields(node, body) {
    var box = el("div", "fields-box");
    box.appendChild(el("h3", null, "Fields"));
    var note = el("p", "hint", "Loading fields\u2026");
    box.appendChild(note);
    body.appendChild(box);
    var columns = el("div", "column-lineage");
    columns.id = "column-lineage";
    columns.setAttribute("aria-live", "polite");
    datasetFields(node).then(function (fields) {
      if (state.selected !== node.id) return;
      if (!fields.length) {
        note.textContent = "No schema recorded for this dataset.";
        state.field = "";
        return;
      }
      note.textContent = "Choose a field to see the fields it comes from and feeds.";
      var table = el("table", "fields");
      var head = el("tr");
      ["field", "type", "description"].forEach(function (h) {
        var th = el("th", null, h);
        th.scope = "col";
        head.appendChild(th);
      });
      table.appendChild(el("thead")).appendChild(head);
      var tbody = table.appendChild(el("tbody"));
      fields.forEach(function (f) {
        var row = el("tr");
        var cell = el("td");
        var button = el("button", "field-button", f.name);
        button.type = "button";
        button.dataset.field = f.name;
        button.setAttribute("aria-pressed", "false");
        button.addEventListener("click", function () { showColumnLineage(node, f.name, columns); });
        cell.appendChild(button);
        row.appendChild(cell);
        row.appendChild(el("td", null, f.type));
        row.appendChild(el("td", null, f.description));
        tbody.appendChild(row);
      });
      box.appendChild(table);
      box.appendChild(columns);
      var wanted = state.field;
      if (wanted && fields.some(function (f) { return f.name === wanted; })) {
        showColumnLineage(node, wanted, columns);
      } else {
        state.field = "";
      }
    }).catch(function (error) {
      note.textContent = "fields unavailable: " + error.message;
      note.className = "state-FAILED";
    });
  }

  function fieldNodeId(namespace, dataset, field) {
    return "datasetField:" + namespace + ":" + dataset + ":" + field;
  }

  // A column-lineage node as {namespace, dataset, field}: from its data when the server sends
  // it (Marquez does), else from its id (the field and dataset never hold ':' here; the
  // namespace may).
  function fieldOf(node, id) {
    var data = (node && node.data) || {};
    if (typeof data.field === "string" && typeof data.dataset === "string") {
      return { namespace: String(data.namespace || ""), dataset: data.dataset, field: data.field };
    }
    var rest = String(id).replace(/^datasetField:/, "");
    var f = rest.lastIndexOf(":");
    var d = rest.lastIndexOf(":", f - 1);
    return { namespace: rest.slice(0, d), dataset: rest.slice(d + 1, f), field: rest.slice(f + 1) };
  }

  // Fields reached from `rootId` one way: the other end of each edge on that side, hop by hop.
  function walkFields(byId, rootId, side) {
    var seen = {};
    seen[rootId] = 0;
    var queue = [rootId];
    var found = [];
    while (queue.length) {
      var id = queue.shift();
      var node = byId[id];
      if (!node) continue;
      var next = [];
      (node[side] || []).forEach(function (edge) {
        next.push(edge.origin === id ? edge.destination : edge.origin);
      });
      if (side === "inEdges" && node.data && Array.isArray(node.data.inputFields)) {
        node.data.inputFields.forEach(function (f) {
          if (f && f.field) next.push(fieldNodeId(f.namespace, f.dataset || f.name, f.field));
        });
      }
      next.forEach(function (other) {
        if (other === undefined || Object.prototype.hasOwnProperty.call(seen, other)) return;
        seen[other] = seen[id] + 1;
        found.push({ id: other, hops: seen[other], ref: fieldOf(byId[other], other) });
        queue.push(other);
      });
    }
    return found;
  }

  function showColumnLineage(node, field, box) {
    var data = node.data || {};
    state.field = field;
    writeHash();
    Array.prototype.forEach.call(document.querySelectorAll(".field-button"), function (b) {
      b.setAttribute("aria-pressed", b.dataset.field === field ? "true" : "false");
    });
    clear(box);
    box.appendChild(el("h3", null, "Column lineage of " + field));
    var status = el("p", "hint", "Loading column lineage\u2026");
    box.appendChild(status);
    var rootId = fieldNodeId(data.namespace, data.name, field);
    serverHas().then(function (has) {
      if (!has.columnLineage) {
        var missing = new Error("no such route");
        missing.status = 404;
        throw missing;
      }
      var params = {
        nodeId: rootId, depth: String(Math.max(1, state.choice.depth)), withDownstream: "true",
        nodeLimit: String(state.choice.nodeLimit || NODE_LIMIT),
      };
      // The drawn graph's window, the same for its fields (column lineage has no other views).
      if (state.choice.since) params.since = state.choice.since;
      if (state.choice.until) params.until = state.choice.until;
      return apiGet("column-lineage", params);
    }).then(function (answer) {
      if (state.field !== field || state.selected !== node.id) return;
      var byId = {};
      (answer.graph || []).forEach(function (n) { byId[n.id] = n; });
      var up = walkFields(byId, rootId, "inEdges");
      var down = walkFields(byId, rootId, "outEdges");
      status.textContent = plural(up.length, "upstream field") + ", " +
        plural(down.length, "downstream field") + "." +
        (answer.truncated === true ? " Cut at the node limit: nearer fields first." : "");
      [["Upstream", "upstream-fields", up], ["Downstream", "downstream-fields", down]]
        .forEach(function (part) {
          box.appendChild(el("h4", null, part[0]));
          var list = el("ul", "field-links");
          list.id = part[1];
          if (!part[2].length) list.appendChild(el("li", "hint", "none"));
          part[2].forEach(function (hit) { list.appendChild(fieldLink(hit)); });
          box.appendChild(list);
        });
    }).catch(function (error) {
      // A server without the route answers a plain 404 (no reason code) or 405.
      var missing = (error.status === 404 && !error.reason) || error.status === 405;
      status.textContent = missing
        ? "Column lineage is not available on this server (GET /api/v1/column-lineage)."
        : "column lineage unavailable: " + error.message;
      status.className = missing ? "hint not-available" : "state-FAILED";
    });
  }

  function fieldLink(hit) {
    var item = el("li");
    item.dataset.fieldId = hit.id;
    var button = el("button", "link-button", hit.ref.dataset + "." + hit.ref.field);
    button.type = "button";
    button.title = "Show the lineage of " + hit.ref.dataset;
    button.addEventListener("click", function () {
      var id = "dataset:" + hit.ref.namespace + ":" + hit.ref.dataset;
      $("node-input").value = id;
      state.selected = id;
      state.field = hit.ref.field;
      load(currentChoice(), id);
    });
    item.appendChild(button);
    if (hit.hops > 1) item.appendChild(el("span", "hint", " (" + hit.hops + " hops)"));
    item.appendChild(el("span", "ns", hit.ref.namespace));
    return item;
  }

  // ---- export -------------------------------------------------------------------------------

  function fileName(ext) {
    var root = state.byId[state.rootId];
    var name = root && root.data && root.data.name ? String(root.data.name) : "graph";
    return "lineage-" + name.replace(/[^A-Za-z0-9._-]+/g, "_").slice(0, 80) + "." + ext;
  }

  function download(blob, name) {
    var link = document.createElement("a");
    link.href = URL.createObjectURL(blob);
    link.download = name;
    link.hidden = true;
    document.body.appendChild(link);
    link.click();
    document.body.removeChild(link);
    setTimeout(function () { URL.revokeObjectURL(link.href); }, 10000);
  }

  function exportPng() {
    if (!state.cy) return;
    download(state.cy.png({ output: "blob", full: true, scale: 2, bg: "#ffffff" }),
      fileName("png"));
  }

  // The drawn graph as SVG, from cytoscape's positions and sizes: shapes, colours and labels
  // as on screen. Built as DOM nodes and serialized, so names are escaped by the serializer.
  function graphSvg() {
    var cy = state.cy;
    var NS = "http://www.w3.org/2000/svg";
    var make = function (tag, attrs, text) {
      var node = document.createElementNS(NS, tag);
      Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, String(attrs[k])); });
      if (text !== undefined) node.textContent = text;
      return node;
    };
    var box = cy.elements().boundingBox({ includeLabels: true, includeOverlays: false });
    var pad = 20;
    var x0 = box.x1 - pad;
    var y0 = box.y1 - pad;
    var w = Math.max(1, box.w + 2 * pad);
    var h = Math.max(1, box.h + 2 * pad);
    var svg = make("svg", {
      xmlns: NS, width: Math.ceil(w), height: Math.ceil(h),
      viewBox: [x0, y0, w, h].map(function (v) { return v.toFixed(1); }).join(" "),
      "font-family": "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif",
    });
    var root = state.byId[state.rootId];
    svg.appendChild(make("title", {}, "Lineage around " +
      (root && root.data ? root.data.namespace + ":" + root.data.name : state.rootId)));
    var defs = svg.appendChild(make("defs"));
    var marker = defs.appendChild(make("marker", {
      id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7,
      orient: "auto-start-reverse",
    }));
    marker.appendChild(make("path", { d: "M0,0L10,5L0,10z", fill: "#9aa5b1" }));
    svg.appendChild(make("rect", { x: x0, y: y0, width: w, height: h, fill: "#ffffff" }));
    var edges = svg.appendChild(make("g", { "class": "edges" }));
    cy.edges().forEach(function (edge) {
      var a = edge.sourceEndpoint();
      var b = edge.targetEndpoint();
      var line = make("line", {
        x1: a.x.toFixed(1), y1: a.y.toFixed(1), x2: b.x.toFixed(1), y2: b.y.toFixed(1),
        stroke: "#9aa5b1", "stroke-width": 1.6, "marker-end": "url(#arrow)",
      });
      line.setAttribute("data-source", edge.source().id());
      line.setAttribute("data-target", edge.target().id());
      edges.appendChild(line);
    });
    var nodes = svg.appendChild(make("g", { "class": "nodes" }));
    cy.nodes().forEach(function (n) {
      var p = n.position();
      var nw = n.width();
      var nh = n.height();
      var isJob = n.data("type") === "JOB";
      var isRun = n.data("type") === "RUN";
      var group = make("g", { "class": isJob ? "job" : isRun ? "run" : "dataset" });
      group.setAttribute("data-id", n.id());
      var shape = function (grow, attrs) {
        if (isRun) {
          var rx = nw / 2 + grow, ry = nh / 2 + grow;
          var points = [[-rx / 2, -ry], [rx / 2, -ry], [rx, 0], [rx / 2, ry], [-rx / 2, ry], [-rx, 0]]
            .map(function (q) { return (p.x + q[0]).toFixed(1) + "," + (p.y + q[1]).toFixed(1); });
          return make("polygon", Object.assign({ points: points.join(" ") }, attrs));
        }
        return isJob
          ? make("rect", Object.assign({ x: p.x - nw / 2 - grow, y: p.y - nh / 2 - grow,
            width: nw + 2 * grow, height: nh + 2 * grow, rx: 5 + grow }, attrs))
          : make("ellipse", Object.assign({ cx: p.x, cy: p.y, rx: nw / 2 + grow,
            ry: nh / 2 + grow }, attrs));
      };
      if (n.hasClass("root")) group.appendChild(shape(7, { fill: "#f4a259", opacity: 0.8 }));
      var body = { fill: isJob ? "#2f6fbf" : isRun ? "#a0522d" : "#2e8b57" };
      if (n.hasClass("failed")) { body.stroke = "#d62828"; body["stroke-width"] = 5; }
      group.appendChild(shape(0, body));
      var text = make("text", {
        x: p.x, y: p.y + nh / 2 + 4 + 11, "text-anchor": "middle", "font-size": 11,
        fill: "#1d232a", "font-weight": n.hasClass("root") ? "bold" : "normal",
      });
      String(n.data("label") || "").split("\n").forEach(function (line, i) {
        text.appendChild(make("tspan", { x: p.x, dy: i ? "1.25em" : 0 }, line));
      });
      group.appendChild(text);
      nodes.appendChild(group);
    });
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + new XMLSerializer().serializeToString(svg);
  }

  function exportSvg() {
    if (!state.cy) return;
    download(new Blob([graphSvg()], { type: "image/svg+xml" }), fileName("svg"));
  }

  // ---- search -------------------------------------------------------------------------------

  var searchTimer = null;
  var searchSeq = 0;

  function runSearch(text) {
    var section = $("search");
    var list = $("search-results");
    var status = $("search-status");
    if (searchTimer) clearTimeout(searchTimer);
    text = text.trim();
    if (!text) {
      section.hidden = true;
      clear(list);
      return Promise.resolve();
    }
    section.hidden = false;
    status.textContent = "Searching\u2026";
    var seq = ++searchSeq;
    return apiGet("search", { q: text, limit: "50" }).then(function (answer) {
      if (seq !== searchSeq) return;
      clear(list);
      var hits = answer.results || [];
      status.textContent = hits.length
        ? (hits.length === 1 ? "1 match" : hits.length + " matches") +
          " for \u201C" + text + "\u201D"
        : "Nothing matches \u201C" + text + "\u201D.";
      hits.forEach(function (hit) {
        var item = el("li");
        var button = el("button", "node-button search-hit");
        button.type = "button";
        button.dataset.nodeId = hit.nodeId;
        var kind = hit.type === "JOB" ? "JOB" : "DATASET";
        button.appendChild(el("span", "kind " + kind, kind === "JOB" ? "job" : "dataset"));
        button.appendChild(document.createTextNode(String(hit.name)));
        button.appendChild(el("span", "ns", " " + String(hit.namespace || "")));
        button.addEventListener("click", function () { reroot(hit.nodeId); });
        item.appendChild(button);
        list.appendChild(item);
      });
    }).catch(function (error) {
      if (seq !== searchSeq) return;
      status.textContent = "search failed: " + error.message;
    });
  }

  // ---- loading ------------------------------------------------------------------------------

  function reroot(id) {
    $("node-input").value = id;
    showViewChoices();
    state.field = "";
    load(currentChoice(), id);
  }

  // `selected`: the node whose details to open once drawn (the chosen node by default).
  function load(choice, selected) {
    state.choice = choice;
    if (!choice.nodeId) {
      document.body.dataset.state = "empty";
      setStatus("Choose a job or dataset: type a name, search, or pick one from the list.");
      return browse();
    }
    state.selected = selected || choice.nodeId;
    choice.expand = choice.expand || [];
    choice.nodeLimit = choice.nodeLimit || NODE_LIMIT;
    var seq = ++state.seq;
    state.expanding = {};
    state.looking = 0;
    writeHash();
    document.body.dataset.state = "loading";
    setStatus("Loading lineage\u2026");
    var params = viewParams(choice, choice.nodeId, choice.depth);
    var asked = apiGet("lineage", params).catch(function (error) {
      // Before the node's first event it is unknown: an empty graph, said so, not an error.
      if ((choice.asOf || choice.until) && error.status === 404) return { graph: [], before: true };
      throw error;
    }).then(function (answer) {
      // The chosen view, then each remembered expansion (asked together, merged in click order).
      var root = bounded(answer, choice.nodeId, choice.nodeLimit);
      return Promise.all(choice.expand.map(fetchHop)).then(function (hops) {
        return {
          graph: root.graph, before: answer.before, hops: hops, nodeId: answer.nodeId,
          truncated: hops.reduce(function (cut, hop) { return cut || hop.truncated; }, root.truncated),
          omitted: root.omitted,
        };
      });
    });
    return asked.then(function (answer) {
      // The slider spans the present graph of jobs: this one, or asked for once.
      var present = choice.asOf || windowed(choice) || choice.granularity !== "job"
        ? null : answer.graph || [];
      return timeRange(choice, present).then(function (range) {
        state.timeRange = range;
        return answer;
      });
    }).then(function (answer) {
      if (seq !== state.seq) return;
      showTime();
      state.truncated = answer.truncated;
      state.omitted = answer.omitted;
      state.graph = [];
      state.byId = {};
      state.links = {};
      merge(answer.graph);
      // A dataset asked by another of its names (a symlink): the answer names its node, shown
      // from then on (its details list the other names).
      if (!state.byId[choice.nodeId] && state.byId[answer.nodeId]) {
        if (state.selected === choice.nodeId) state.selected = answer.nodeId;
        choice.nodeId = answer.nodeId;
        writeHash();
      }
      // A node two answers hold gets the edges of both (merge), then all is drawn at once.
      answer.hops.forEach(function (hop) { merge(hop.graph); });
      draw(state.graph, choice.nodeId);
      var when = whenText(choice);
      if (answer.before) {
        setStatus("Nothing recorded for " + choice.nodeId + when + ".");
        $("truncated-notice").hidden = true;
        clear($("details-body"));
        document.body.dataset.state = "ready";
        return;
      }
      showCount();
      lookahead(choice.nodeId, choice.depth);
      choice.expand.forEach(function (id) { lookahead(id, 1); });
      var open = state.byId[state.selected] ? state.selected : choice.nodeId;
      if (open !== state.selected) state.field = "";
      showDetails(open);
      document.body.dataset.state = "ready";
    }).catch(function (error) {
      if (seq !== state.seq) return;
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
    // Where an edge's middle is drawn, in page (client) coordinates.
    edgeClientPosition: function (source, target) {
      if (!state.cy) return null;
      var edge = state.cy.edges().filter(function (e) {
        return e.source().id() === source && e.target().id() === target;
      });
      if (edge.empty()) return null;
      var pos = edge.renderedMidpoint();
      var box = $("graph").getBoundingClientRect();
      return { x: box.left + pos.x, y: box.top + pos.y };
    },
    // The SVG the "Export SVG" button downloads, as text.
    graphSvg: function () { return state.cy ? graphSvg() : null; },
  };

  function loadFromHash() {
    var choice = readHash();
    $("node-input").value = choice.nodeId;
    $("depth-input").value = String(choice.depth);
    $("direction-input").value = choice.direction;
    $("granularity-input").value = choice.granularity;
    showViewChoices();
    state.field = choice.field;
    return load(
      {
        nodeId: choice.nodeId, depth: choice.depth, direction: choice.direction, asOf: choice.asOf,
        expand: choice.expand, nodeLimit: choice.nodeLimit, granularity: choice.granularity,
        since: choice.since, until: choice.until,
      },
      choice.selected || choice.nodeId
    );
  }

  document.addEventListener("DOMContentLoaded", function () {
    if (typeof cytoscape !== "function") {
      setStatus("graph-libs.js did not load; reinstall the package.", true);
      document.body.dataset.state = "error";
      return;
    }
    $("controls").addEventListener("submit", function (evt) {
      evt.preventDefault();
      var choice = currentChoice();
      // Same node, other depth or direction: keep the open details if still in the graph.
      var keep = choice.nodeId === state.choice.nodeId ? state.selected : "";
      if (!keep) state.field = "";
      load(choice, keep);
    });
    $("search-form").addEventListener("submit", function (evt) {
      evt.preventDefault();
      runSearch($("search-input").value);
    });
    $("search-input").addEventListener("input", function () {
      if (searchTimer) clearTimeout(searchTimer);
      var text = $("search-input").value;
      searchTimer = setTimeout(function () { runSearch(text); }, 250);
    });
    $("time-form").addEventListener("submit", function (evt) { evt.preventDefault(); });
    $("asof-range").addEventListener("change", function () { setAsOf(asOfFromSlider()); });
    $("asof-input").addEventListener("change", function () {
      var ms = Date.parse($("asof-input").value + "Z");
      if (isFinite(ms)) setAsOf(new Date(ms).toISOString());
    });
    $("asof-now").addEventListener("click", function () { setAsOf(""); });
    // The view switch redraws at once, as the slider does.
    $("granularity-input").addEventListener("change", function () {
      setGranularity($("granularity-input").value);
    });
    // The window is applied as a whole (two pickers edited field by field would ask often).
    $("window-form").addEventListener("submit", function (evt) {
      evt.preventDefault();
      setWindow(windowValue("since-input"), windowValue("until-input"));
    });
    $("window-clear").addEventListener("click", function () { setWindow("", ""); });
    // Back to the chosen view alone: the expansions are dropped (from the URL too).
    $("collapse").addEventListener("click", function () {
      var choice = currentChoice();
      choice.expand = [];
      load(choice, state.selected);
    });
    $("export-png").addEventListener("click", exportPng);
    $("export-svg").addEventListener("click", exportSvg);
    // A link pasted into the address bar of an open page changes only the hash.
    window.addEventListener("hashchange", function () {
      var want = readHash();
      var have = state.choice;
      if (want.nodeId !== have.nodeId || want.depth !== have.depth ||
          want.direction !== have.direction || (want.selected || want.nodeId) !== state.selected ||
          want.field !== state.field || want.asOf !== have.asOf ||
          want.granularity !== have.granularity || want.since !== have.since ||
          want.until !== have.until ||
          want.expand.join("\u0000") !== (have.expand || []).join("\u0000") ||
          want.nodeLimit !== have.nodeLimit) {
        loadFromHash();
      }
    });
    $("node-input").addEventListener("input", suggest);
    $("node-input").addEventListener("input", showViewChoices);
    $("key-input").addEventListener("change", function () {
      state.apiKey = $("key-input").value || null;
      load(currentChoice(), state.selected);
    });
    loadFromHash();
  });
})();
