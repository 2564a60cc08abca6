// The themis dashboard: reads the planner's API (docs/api.md) and redraws
// when its index moves (blocking queries on /v1/nodes).
"use strict";

const $ = (sel) => document.querySelector(sel);

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "style") e.style.cssText = v; else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c === undefined || c === null ? "" : c);
  return e;
}

// colour gives each job a stable colour from its name.
function colour(job) {
  let h = 2166136261;
  for (let i = 0; i < job.length; i++) h = Math.imul(h ^ job.charCodeAt(i), 16777619);
  h ^= h >>> 13; h = Math.imul(h, 0x5bd1e995); h ^= h >>> 15;
  return `hsl(${(h >>> 0) % 360}, 65%, 68%)`;
}

// The planner's API may ask for a Nomad ACL token (docs/api.md, "Access"):
// it is kept in this browser's session storage, asked for once when the
// API refuses without one.
async function get(path) {
  const headers = {};
  const token = sessionStorage.getItem("themis.nomadToken");
  if (token) headers["X-Nomad-Token"] = token;
  const r = await fetch(path, { cache: "no-store", headers });
  const body = await r.json();
  if (r.status === 403 && !sessionStorage.getItem("themis.asked")) {
    sessionStorage.setItem("themis.asked", "1");
    const t = window.prompt("The planner's API needs a Nomad ACL token (it shows the namespaces the token can read):");
    if (t) {
      sessionStorage.setItem("themis.nomadToken", t);
      sessionStorage.removeItem("themis.asked");
      return get(path);
    }
  }
  return { status: r.status, index: Number(r.headers.get("X-Themis-Index") || 0), body };
}

function drawNodes(doc) {
  const nodes = $("#nodes");
  nodes.replaceChildren();
  const jobs = new Set();
  for (const n of doc.nodes) {
    const grid = el("div", { class: "gpus" });
    for (const g of n.gpus) {
      const label = g.job ? g.job.split("/").pop() : (g.state === "unhealthy" ? "bad" : String(g.index));
      const title = [`GPU ${g.index} ${g.id}`, g.state, g.job, g.lease_id && `lease ${g.lease_id}`,
        g.deadline && `stops by ${g.deadline}`, g.vc && `vc ${g.vc}`, g.cell && `cell ${g.cell}`].filter(Boolean).join("\n");
      const attrs = { class: `gpu ${g.state}`, title, "data-gpu": g.id, "data-state": g.state };
      if (g.job) { attrs.style = `background: ${colour(g.job)}`; attrs["data-job"] = g.job; jobs.add(g.job); }
      grid.append(el("div", attrs, label));
    }
    nodes.append(el("div", { class: "node" + (n.schedulable ? "" : " unschedulable"), "data-node": n.name },
      el("h3", {}, n.name, n.rack ? ` (${n.rack})` : ""),
      el("div", { class: "counts" }, `${n.gpus_free} free · ${n.gpus_leased} leased · ${n.gpus_revoking} revoking · ${n.gpus_unhealthy} unhealthy`),
      grid));
  }
  if (doc.nodes.length === 0) nodes.append(el("p", { class: "muted" }, "No node with themis GPUs."));
  const legend = $("#legend");
  legend.replaceChildren();
  for (const j of [...jobs].sort()) legend.append(el("span", {}, el("i", { style: `background: ${colour(j)}` }), j));

  const vcs = doc.vcs || [];
  $("#vcs-section").hidden = vcs.length === 0;
  const body = $("#vcs tbody");
  body.replaceChildren();
  for (const v of vcs) {
    const cells = Object.entries(v.cells).map(([t, n]) => `${n} × ${t}`).join(", ");
    body.append(el("tr", {}, el("td", {}, v.name), el("td", {}, v.gpus), el("td", {}, v.used), el("td", {}, v.free), el("td", {}, v.doomed), el("td", {}, cells)));
  }
}

function drawQueue(doc) {
  const body = $("#queue tbody");
  body.replaceChildren();
  let n = 0;
  for (const q of doc.vcs) {
    for (const j of q.jobs) {
      n++;
      body.append(el("tr", { "data-job": j.job }, el("td", {}, q.vc || "—"), el("td", {}, j.position),
        el("td", {}, el("i", { style: `display:inline-block;width:.8em;height:.8em;margin-right:.3em;background:${colour(j.job)}` }), j.job),
        el("td", {}, j.gpus), el("td", j.held ? { title: "held in Nomad at count 0: " + j.held } : {}, j.held ? j.state + " (held)" : j.state),
        el("td", {}, j.reason)));
    }
  }
  $("#queue-empty").hidden = n > 0;
}

// drawApps shows the last auction round per app (Themis; hidden for
// policies that run none).
function drawApps(doc) {
  $("#apps-section").hidden = !doc.round;
  if (!doc.round) return;
  $("#apps-round").textContent = `round ${doc.round} at ${new Date(doc.at).toLocaleTimeString()}, ${doc.offer_gpus} GPUs offered`;
  const body = $("#apps tbody");
  body.replaceChildren();
  const rho = (x) => (x ? x.toFixed(3) : "");
  for (const a of doc.apps) {
    body.append(el("tr", { "data-app": a.app }, el("td", {}, a.app), el("td", {}, rho(a.rho)), el("td", {}, a.bid ? "yes" : "no"),
      el("td", {}, a.won || ""), el("td", {}, rho(a.rho_after)), el("td", {}, a.placed ? `${a.placed}${a.c ? ` (c ${a.c.toFixed(2)})` : ""}` : ""),
      el("td", {}, a.lease_ends ? new Date(a.lease_ends).toLocaleTimeString() : "")));
  }
}

// drawJobs counts the jobs by state and lists those that need a look:
// failed, lost, rejected or set aside as unreadable, with their reasons.
function drawJobs(doc) {
  const counts = {};
  for (const j of doc.jobs) counts[j.state] = (counts[j.state] || 0) + 1;
  $("#job-counts").textContent = Object.keys(counts).sort().map((s) => `${counts[s]} ${s}`).join(" · ");
  const body = $("#ended tbody");
  body.replaceChildren();
  const look = ["failed", "lost", "rejected", "unreadable"];
  let n = 0;
  for (const j of doc.jobs) {
    if (!look.includes(j.state)) continue;
    n++;
    body.append(el("tr", { "data-job": j.job, "data-state": j.state }, el("td", {}, j.job),
      el("td", { class: `state-${j.state}` }, j.state), el("td", {}, j.since ? new Date(j.since).toLocaleTimeString() : ""),
      el("td", {}, j.reason || "")));
  }
  $("#ended-empty").hidden = n > 0;
}

function drawDecisions(doc) {
  const body = $("#decisions tbody");
  body.replaceChildren();
  for (const d of doc.decisions.slice().reverse()) {
    body.append(el("tr", { "data-kind": d.kind }, el("td", {}, new Date(d.time).toLocaleTimeString()),
      el("td", { class: `kind-${d.kind}` }, d.kind), el("td", {}, d.job), el("td", {}, d.node || ""),
      el("td", {}, (d.gpus || []).length || ""), el("td", {}, d.reason)));
  }
}

async function refresh() {
  const [nodes, queue, decisions, planner, apps, jobs] = await Promise.all([
    get("/v1/nodes"), get("/v1/queue"), get("/v1/decisions?limit=50"), get("/v1/planner"), get("/v1/apps"), get("/v1/jobs")]);
  const p = planner.body;
  $("#planner").textContent = `${p.id}${p.leading ? " (leader)" : " (standby)"}` +
    (nodes.body.policy ? ` · ${nodes.body.policy}` : "") +
    (p.round && p.round.time ? ` · last round ${new Date(p.round.time).toLocaleTimeString()} in ${p.round.duration_ms} ms` : "") +
    (p.round && p.round.error ? ` · error: ${p.round.error}` : "");
  if (nodes.status === 503) {
    const s = $("#standby");
    s.hidden = false;
    s.replaceChildren(nodes.body.error);
    if (nodes.body.leader && nodes.body.leader.api) {
      s.append(" ", el("a", { href: nodes.body.leader.api + "/ui/" }, "Open the leader's dashboard"));
    }
    return 0;
  }
  $("#standby").hidden = true;
  drawNodes(nodes.body);
  drawApps(apps.body);
  drawQueue(queue.body);
  drawJobs(jobs.body);
  drawDecisions(decisions.body);
  $("#index").textContent = `index ${nodes.index}`;
  document.body.dataset.index = nodes.index;
  return nodes.index;
}

// loop redraws, then waits on a blocking query for the next change. With
// #once in the URL it draws once and stops (a static page: headless tests,
// printing).
async function loop() {
  let index = 0;
  for (;;) {
    try {
      index = await refresh();
      if (location.hash === "#once") return;
      if (index === 0) { await new Promise((r) => setTimeout(r, 3000)); continue; }
      await get(`/v1/nodes?index=${index}&wait=60s`);
    } catch (e) {
      $("#planner").textContent = `cannot reach the planner: ${e}`;
      await new Promise((r) => setTimeout(r, 3000));
    }
  }
}

loop();
