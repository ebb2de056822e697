// The dashboard's page: plain JavaScript, no build step, nothing fetched from elsewhere.
// Every text reaches the DOM through textContent (never innerHTML): the server has redacted
// it, and nothing it holds can run as markup.
"use strict";

// The session secret lives in this tab's sessionStorage: only this origin (this port) can
// read it, a reload finds it, and it goes in a header no other site can make us send.
const SESSION_KEY = "mtl-session";
const SESSION_HEADER = "x-mtl-session";
const state = { session: null, options: null, team: false, render: null, dirty: false, notice: null, acting: false, preview: null };
const view = () => document.getElementById("view");
const render = (...nodes) => view().replaceChildren(...nodes.flat().filter((n) => n !== null && n !== undefined && n !== false));

// -- small helpers ----------------------------------------------------------------------------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "text") node.textContent = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function select(name, label, values, current, blank) {
  const box = el("select", { name, id: `f-${name}` },
    blank === undefined ? null : el("option", { value: "" }, blank),
    values.map((v) => {
      const value = typeof v === "object" ? v.value : v;
      const text = typeof v === "object" ? `${v.value} (${v.count})` : v;
      return el("option", { value, selected: value === current }, text);
    }));
  return el("label", { for: `f-${name}` }, label, box);
}

function fmt(number, digits = 3) {
  return number === null || number === undefined ? "—" : Number(number).toFixed(digits);
}

function when(iso) {
  if (!iso) return "—";
  const date = new Date(iso);
  return isNaN(date) ? iso : date.toLocaleString();
}

// What an action said ("Saved", "Requeued 1 job"): kept for the page it was said on, so a
// live update that redraws the page meanwhile does not wipe it.
function messageBox() {
  const box = el("div", { id: "message", role: "status", "aria-live": "polite" });
  const notice = state.notice;
  if (notice && notice.hash === location.hash) {
    box.append(el("p", { class: notice.kind }, notice.text),
      notice.items.length ? el("ul", { class: "reasons" }, notice.items.map((i) => el("li", {}, i))) : null);
  }
  return box;
}

function notify(text, kind = "okay", items = []) {
  state.notice = { hash: location.hash, text, kind, items };
  const box = document.getElementById("message");
  if (box) box.replaceWith(messageBox());
}

class ApiError extends Error {}

class SessionError extends Error {}

async function api(path, body) {
  const init = { credentials: "omit", headers: {} };
  if (state.session) init.headers[SESSION_HEADER] = state.session;
  if (body !== undefined) {
    init.method = "POST";
    init.headers["content-type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  if (response.status === 401) throw new SessionError((await response.json().catch(() => ({}))).error || "no session");
  let data;
  try {
    data = await response.json();
  } catch {
    throw new ApiError(`the dashboard answered ${response.status} without data`);
  }
  if (!response.ok) throw new ApiError(data.error || `error ${response.status}`);
  return data;
}

function showError(error) {
  render(el("h1", {}, "Something went wrong"),
    el("p", { class: "error", role: "alert" }, error.message));
}

function confirmDialog(title, text, okLabel) {
  const dialog = document.getElementById("confirm");
  document.getElementById("confirm-title").textContent = title;
  document.getElementById("confirm-text").textContent = text;
  document.getElementById("confirm-ok").textContent = okLabel;
  dialog.returnValue = "cancel";
  dialog.showModal();
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
  });
}

function badges(item) {
  return [
    item.polarity ? el("span", { class: `badge ${item.polarity}` }, item.polarity) : null,
    item.status === "retired" ? el("span", { class: "badge retired" }, "retired") : null,
    item.source === "team" ? el("span", { class: "badge" }, "team") : null,
  ];
}

function insightLink(id, title) {
  return el("a", { href: `#/insight/${encodeURIComponent(id)}` }, title || id);
}

// -- routing --------------------------------------------------------------------------------

function parseHash() {
  const [path, query] = location.hash.replace(/^#\/?/, "").split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  return { page: parts[0] || "browse", arg: parts[1], query: new URLSearchParams(query || "") };
}

const pages = { browse: browsePage, plan: planPage, insight: insightPage, sessions: sessionsPage, upkeep: upkeepPage, map: mapPage, trials: trialsPage };

async function route(focus = true) {
  const { page, arg, query } = parseHash();
  const show = pages[page] || browsePage;
  for (const link of document.querySelectorAll("nav a")) {
    const here = link.dataset.page === page;
    if (here) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  state.dirty = false;
  if (state.notice && state.notice.hash !== location.hash) state.notice = null;
  state.render = () => show(arg, query).catch(showError);
  await state.render();
  const keep = state.refocus && document.getElementById(state.refocus);
  state.refocus = null;
  if (keep) {
    keep.focus();
    keep.setSelectionRange(keep.value.length, keep.value.length);
  } else if (focus) view().focus({ preventScroll: true });
}

// -- browse ---------------------------------------------------------------------------------

const FILTERS = ["domain", "category", "polarity", "project", "source", "rating"];
const PAGE = 25;

async function browsePage(_arg, query) {
  const params = new URLSearchParams();
  for (const name of [...FILTERS, "text", "sort", "offset"]) {
    if (query.get(name)) params.set(name, query.get(name));
  }
  params.set("limit", PAGE);
  const [facets, page] = await Promise.all([api("/api/facets"), api(`/api/insights?${params}`)]);
  const o = state.options;
  const form = el("form", { class: "filters", role: "search", "aria-label": "Filter insights" },
    el("label", { for: "f-text" }, "Search",
      el("input", { type: "search", id: "f-text", name: "text", value: query.get("text") || "",
        placeholder: "words in the title or text" })),
    select("domain", "Domain", facets.domain, query.get("domain"), "any"),
    select("category", "Category", facets.category, query.get("category"), "any"),
    select("polarity", "Polarity", o.polarities, query.get("polarity"), "any"),
    select("project", "Project", facets.project, query.get("project"), "any"),
    select("source", "Source", o.sources, query.get("source"), "both"),
    select("rating", "Rating", o.ratings, query.get("rating"), "any"),
    select("sort", "Sort", o.sorts, query.get("sort") || "recent"),
    el("button", { type: "submit", class: "primary" }, "Apply"));

  const go = (offset) => {
    const next = new URLSearchParams();
    for (const [key, value] of new FormData(form)) if (value) next.set(key, value);
    if (next.get("sort") === "recent") next.delete("sort");
    if (offset) next.set("offset", offset);
    location.hash = `#/browse?${next}`;
  };
  form.addEventListener("submit", (event) => { event.preventDefault(); go(0); });
  for (const box of form.querySelectorAll("select")) box.addEventListener("change", () => go(0));
  let typing;
  form.querySelector("#f-text").addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => { state.refocus = "f-text"; go(0); }, 300);
  });

  const rows = page.items.map((item) => el("tr", {},
    el("td", {}, insightLink(item.id, item.title), el("div", { class: "muted" }, item.description)),
    el("td", {}, badges(item), item.category),
    el("td", {}, item.domain || "—"),
    el("td", {}, item.project || "—"),
    el("td", { class: "num" }, item.support),
    el("td", { class: "num" }, `${item.helpful} / ${item.harmful}`),
    el("td", { class: "num" }, item.recall_count),
    el("td", {}, when(item.updated_at))));
  const offset = page.offset;
  const last = Math.min(offset + page.items.length, page.total);
  const pager = el("div", { class: "pager" },
    el("button", { type: "button", disabled: offset === 0, onclick: () => go(Math.max(0, offset - PAGE)) }, "← Previous"),
    el("span", { id: "count" }, page.total ? `${offset + 1}-${last} of ${page.total}` : "no insights match"),
    el("button", { type: "button", disabled: last >= page.total, onclick: () => go(offset + PAGE) }, "Next →"),
    el("span", { class: "muted" }, `server ${fmt(page.server_ms, 1)} ms`));
  render(
    el("h1", {}, "Browse", el("span", { class: "muted" }, ` · ${facets.total} active, ${facets.retired} retired`)),
    form,
    el("table", { "aria-label": "Insights" },
      el("thead", {}, el("tr", {}, ["Insight", "Category", "Domain", "Project"].map((h) => el("th", { scope: "col" }, h)),
        ["Support", "Helpful / harmful", "Recalled"].map((h) => el("th", { scope: "col", class: "num" }, h)),
        el("th", { scope: "col" }, "Updated"))),
      el("tbody", {}, rows)),
    pager);
}

// -- try a plan -----------------------------------------------------------------------------

let lastPlan = { plan: "", k: 3, scope: "all", project: "" };

async function planPage() {
  const facets = await api("/api/facets");
  const result = el("div", { id: "preview", "aria-live": "polite" });
  const form = el("form", { "aria-label": "Try a plan" },
    el("div", { class: "field" }, el("label", { for: "plan" }, "Plan: what you are about to do, in 3-4 sentences"),
      el("textarea", { id: "plan", name: "plan", rows: 4, required: true }, lastPlan.plan)),
    el("div", { class: "filters" },
      select("k", "How many", ["1", "2", "3", "4", "5", "8", "10", "20"], String(lastPlan.k)),
      select("scope", "Scope", state.options.scopes, lastPlan.scope),
      select("project", "Project", facets.project, lastPlan.project, "none (as from no project)"),
      el("button", { type: "submit", class: "primary" }, "Recall")));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    lastPlan = { plan: form.plan.value, k: Number(form.k.value), scope: form.scope.value, project: form.project.value };
    await runPlan(result);
  });
  render(el("h1", {}, "Try a plan"),
    el("p", { class: "muted" }, "The notes the assistant would get for this plan, through the same ranking as recall_insights, and why each ranked there. A preview counts no recall."),
    form, result);
  if (lastPlan.plan) await runPlan(result);
}

async function runPlan(result) {
  let data;
  try {
    data = await api("/api/preview", lastPlan);
  } catch (error) {
    result.replaceChildren(el("p", { class: "error", role: "alert" }, error.message));
    return;
  }
  const parts = Object.fromEntries(data.parts.map((p) => [p.id, p]));
  const rows = data.hits.map((hit, n) => {
    const part = parts[hit.id] || {};
    return el("tr", {},
      el("td", { class: "num" }, n + 1),
      el("td", {}, insightLink(hit.id, hit.title), " ", badges(hit)),
      el("td", { class: "num score" }, fmt(hit.score)),
      el("td", { class: "num" }, fmt(part.similarity)),
      el("td", { class: "num" }, fmt(part.rating)),
      el("td", { class: "num" }, part.dense_rank ?? "—"),
      el("td", { class: "num" }, fmt(part.keyword_score, 2)),
      el("td", { class: "num" }, part.keyword_rank ?? "—"),
      el("td", { class: "num" }, fmt(part.fused, 4)),
      el("td", { class: "shown" }, shownOnItsOwn(hit, data.unasked)));
  });
  const leftOut = data.left_out.length
    ? el("div", {}, el("h2", {}, "Left out by feedback"),
      el("ul", {}, data.left_out.map((l) => el("li", {}, insightLink(l.id, l.title), ` — ${l.reason}`,
        l.retired ? " (left out of every plan)" : ""))))
    : el("p", { class: "muted" }, "Feedback left nothing out for this plan.");
  result.replaceChildren(
    el("p", { class: "muted" }, `method ${data.method} · recall ${fmt(data.seconds * 1000, 1)} ms · server ${fmt(data.server_ms, 1)} ms`),
    el("table", { "aria-label": "Recalled insights" },
      el("thead", {}, el("tr", {}, el("th", { class: "num", scope: "col" }, "#"), el("th", { scope: "col" }, "Insight"),
        ["Score", "Meaning (cosine)", "Rating term", "Meaning rank", "Keyword (BM25)", "Keyword rank", "Fused"]
          .map((h) => el("th", { scope: "col", class: "num" }, h)),
        el("th", { scope: "col" }, "Shown on its own"))),
      el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", { colspan: 10 }, "Nothing recalled.")))),
    el("p", { class: "muted" }, `Shown on its own: what the plan hook would put before the assistant unasked for this plan: of the top 3, the one with the highest relevance gate probability p, if it reaches ${fmt(data.min_p, 2)} (MTL_MCP_AUTO_RECALL_MIN_P). A recall the assistant asks for gets every row.`),
    leftOut,
    el("h2", {}, "What the assistant reads"),
    el("pre", { class: "notes", id: "notes" }, data.notes));
}

function shownOnItsOwn(hit, unasked) {
  if (hit.p === null || hit.p === undefined) return "—";
  return `${unasked.includes(hit.id) ? "yes" : "no"}, p = ${fmt(hit.p, 2)}`;
}

// -- one insight ----------------------------------------------------------------------------

const EDITABLE = ["title", "description", "content", "domain", "category", "polarity", "languages", "tags"];

// The change an action makes is shown by the action itself, not by the live feed: a render
// from the feed meanwhile would redraw the page under it and drop its notice.
async function acting(work) {
  state.acting = true;
  try {
    return await work();
  } finally {
    state.acting = false;
  }
}

async function insightPage(id) {
  const data = await api(`/api/insights/${encodeURIComponent(id)}`);
  const item = data.insight;
  const own = item.source !== "team";
  const message = messageBox();

  const act = (name, body, done) => acting(async () => {
    try {
      const answer = await api(`/api/insights/${encodeURIComponent(id)}/${name}`, body);
      state.dirty = false;
      if (done) done(answer);
      else await state.render();
    } catch (error) {
      notify(error.message, "error");
    }
  });

  const fields = el("dl", { class: "fields" });
  const add = (name, value) => fields.append(el("dt", {}, name), el("dd", {}, value ?? "—"));
  for (const name of ["title", "description", "content", "polarity", "category", "domain"]) add(name, item[name]);
  add("languages", item.languages.join(", ") || "—");
  add("tags", item.tags.join(", ") || "—");
  add("status", item.status);
  add("source", item.source);
  add("abstraction score", fmt(item.abstraction_score, 2));
  add("helpful / harmful", `${item.helpful} / ${item.harmful}`);
  add("recalled", item.recall_count);
  add("notes", item.notes.length ? el("ul", {}, item.notes.map((n) => el("li", {}, n))) : "—");
  add("id", item.id);

  const provenance = el("dl", { class: "fields" });
  const prov = (name, value) => provenance.append(el("dt", {}, name), el("dd", {}, value ?? "—"));
  prov("support", `${item.support} session${item.support === 1 ? "" : "s"} produced or confirmed it`);
  prov("first session", item.session_id);
  prov("client", item.client);
  prov("distilled by", item.distilled_by);
  prov("projects", (item.projects.length ? item.projects : [item.project]).filter(Boolean).join(", ") || "—");
  prov("created", when(item.created_at));
  prov("updated", when(item.updated_at));

  const history = data.history;
  const sessions = [...new Set(history.verdicts.map((v) => v.session_id).concat(history.recalls.map((r) => r.session_id)).filter(Boolean))];
  const recalls = history.recalls.length
    ? el("table", { "aria-label": "Plans it was recalled for" },
      el("thead", {}, el("tr", {}, ["When", "Trigger", "Session", "Plan"].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, history.recalls.map((r) => el("tr", {},
        el("td", {}, when(r.at)), el("td", {}, r.trigger), el("td", {}, r.session_id || "—"), el("td", {}, r.plan)))))
    : el("p", { class: "muted" }, "No model has been given it yet.");
  const verdicts = history.verdicts.length
    ? el("table", { "aria-label": "Feedback history" },
      el("thead", {}, el("tr", {}, ["When", "Verdict", "Session", "Why"].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, history.verdicts.map((v) => el("tr", {},
        el("td", {}, when(v.at)), el("td", {}, v.verdict + (v.mode ? ` (${v.mode})` : "")),
        el("td", {}, v.session_id), el("td", {}, v.reason || "—")))))
    : el("p", { class: "muted" }, "No session verdicts yet.");

  // edit
  const edit = el("form", { "aria-label": "Edit this insight", id: "edit" });
  const o = state.options;
  for (const name of EDITABLE) {
    const value = Array.isArray(item[name]) ? item[name].join(", ") : item[name] || "";
    let input;
    if (name === "category") input = el("select", { id: `e-${name}`, name }, o.categories.map((c) => el("option", { value: c, selected: c === value }, c)));
    else if (name === "polarity") input = el("select", { id: `e-${name}`, name }, o.polarities.map((c) => el("option", { value: c, selected: c === value }, c)));
    else if (name === "content" || name === "description") input = el("textarea", { id: `e-${name}`, name, rows: name === "content" ? 4 : 2 }, value);
    else input = el("input", { id: `e-${name}`, name, value });
    edit.append(el("div", { class: "field" }, el("label", { for: `e-${name}` }, name), input));
  }
  edit.addEventListener("input", () => { state.dirty = true; });
  const reasons = el("div", { id: "edit-result", "aria-live": "polite" });
  edit.append(el("div", { class: "actions" }, el("button", { type: "submit", class: "primary", disabled: !own }, "Save edit")), reasons);
  edit.addEventListener("submit", (event) => {
    event.preventDefault();
    const changed = {};
    for (const name of EDITABLE) {
      let value = edit.elements[name].value;
      if (name === "languages" || name === "tags") value = value.split(",").map((s) => s.trim()).filter(Boolean);
      else value = value.trim() || null;
      const before = item[name];
      if (JSON.stringify(value) !== JSON.stringify(before ?? null)) changed[name] = value;
    }
    if (!Object.keys(changed).length) { reasons.replaceChildren(el("p", { class: "muted" }, "Nothing changed.")); return; }
    act("edit", { fields: changed }, async (result) => {
      if (result.status === "rejected") {
        state.dirty = true;
        reasons.replaceChildren(el("p", { class: "error", role: "alert" }, "Rejected: nothing was changed."),
          el("ul", { class: "reasons" }, result.reasons.map((r) => el("li", {}, r))));
        return;
      }
      await state.render();
      notify("Saved: linted and embedded again.", "okay", result.warnings);
    });
  });

  // rate, retire, restore, forget, purge, share
  const note = el("input", { id: "rate-note", name: "note", placeholder: "why (optional)" });
  const rate = el("div", { class: "panel" }, el("h2", {}, "Rate"),
    el("div", { class: "actions" }, el("label", { for: "rate-note" }, "Note "), note,
      el("button", { type: "button", onclick: () => act("rate", { helpful: true, note: note.value || null }) }, "Helpful"),
      el("button", { type: "button", onclick: () => act("rate", { helpful: false, note: note.value || null }) }, "Harmful")));
  const reason = el("input", { id: "retire-reason", placeholder: "reason (optional)" });
  const lifecycle = el("div", { class: "panel" }, el("h2", {}, "Retire, restore, forget"),
    item.status === "retired"
      ? el("div", { class: "actions" }, el("button", { type: "button", disabled: !own, onclick: () => act("restore", {}) }, "Restore"))
      : el("div", { class: "actions" }, el("label", { for: "retire-reason" }, "Reason "), reason,
        el("button", { type: "button", disabled: !own, onclick: () => act("retire", { reason: reason.value || null }) }, "Retire")),
    el("div", { class: "actions" },
      el("button", {
        type: "button", class: "danger", disabled: !own, onclick: async () => {
          if (await confirmDialog("Forget this insight?", `"${item.title}" is deleted; older table versions keep its text until compaction.`, "Forget"))
            act("forget", { confirm: id }, () => { location.hash = "#/browse"; });
        },
      }, "Forget…"),
      el("button", {
        type: "button", class: "danger", disabled: !own, onclick: async () => {
          if (await confirmDialog("Purge this insight?", `"${item.title}" is deleted and every trace of it removed from disk (old versions, backups, ledgers). This cannot be undone.`, "Purge"))
            act("purge", { confirm: id }, () => { location.hash = "#/browse"; });
        },
      }, "Purge…")));
  const share = el("div", { class: "panel" }, el("h2", {}, "Share with the team"),
    data.team
      ? el("div", { class: "actions" }, el("button", {
        type: "button", disabled: !own, onclick: () => act("share", { dry_run: true }, async ([screened]) => {
          if (screened.status !== "would-share") {
            notify(`Not shared: ${screened.status}`, "error", screened.reasons.concat(screened.warnings));
            return;
          }
          if (await confirmDialog("Share with the team?", `The share policy passed "${item.title}". Everyone with the team pool will be recalled it.`, "Share"))
            act("share", {}, async ([shared]) => { await state.render(); notify(`Shared: ${shared.status}`); });
        }),
      }, "Share…"))
      : el("p", { class: "muted" }, "No team pool is configured (MTL_MCP_TEAM_URI)."));

  render(
    el("p", {}, el("a", { href: "#/browse" }, "← Browse")),
    el("h1", {}, item.title, " ", badges(item)),
    message,
    el("div", { class: "grid" },
      el("div", {},
        el("div", { class: "panel" }, el("h2", {}, "Fields"), fields),
        el("div", { class: "panel" }, el("h2", {}, "Provenance"), provenance,
          sessions.length ? el("p", { class: "muted" }, `Sessions that saw it: ${sessions.join(", ")}`) : null),
        el("h2", {}, "Plans it was recalled for"), recalls,
        el("h2", {}, "Feedback history"), verdicts),
      el("div", {},
        own ? el("div", { class: "panel" }, el("h2", {}, "Edit"), el("p", { class: "muted" }, "Linted, redacted and embedded again, as add does."), edit)
          : el("p", { class: "muted" }, "A team insight: rate it here; edit your own copy."),
        rate, lifecycle, share)));
}

// -- sessions -------------------------------------------------------------------------------

async function sessionsPage() {
  const data = await api("/api/sessions");
  const message = messageBox();
  const sessions = data.sessions.length ? data.sessions.map((s) => {
    const title = (id) => s.titles[id] || id;
    return el("details", { class: "session" },
      el("summary", {}, `${when(s.last_at)} · ${s.client || "?"} · ${s.project || "no project"} · `,
        `${s.recalls.length} recall${s.recalls.length === 1 ? "" : "s"}, ${s.learnt.length} learnt, ${s.verdicts.length} verdict${s.verdicts.length === 1 ? "" : "s"}`,
        el("span", { class: "muted" }, ` (${s.session_id})`)),
      el("h3", {}, "Recalled"),
      s.recalls.length ? el("ul", {}, s.recalls.map((r) => el("li", {}, `${r.trigger}: `, el("q", {}, r.plan), " → ",
        r.hits.map((h, n) => [n ? ", " : "", insightLink(h.id, title(h.id))])))) : el("p", { class: "muted" }, "nothing"),
      el("h3", {}, "Learnt"),
      s.learnt.length ? el("ul", {}, s.learnt.map((l) => el("li", {}, insightLink(l.id, l.title)))) : el("p", { class: "muted" }, "nothing"),
      el("h3", {}, "Verdicts"),
      s.verdicts.length ? el("ul", {}, s.verdicts.map((v) => el("li", {}, `${v.verdict}: `, insightLink(v.insight, title(v.insight)), v.reason ? ` — ${v.reason}` : ""))) : el("p", { class: "muted" }, "none"));
  }) : [el("p", { class: "muted" }, "No sessions recorded yet.")];

  const failed = data.queue.filter((j) => j.state === "failed").length;
  const queue = data.queue.length
    ? el("table", { "aria-label": "Distillation queue" },
      el("thead", {}, el("tr", {}, ["Session", "State", "Client", "Transcript", "Attempts", "Next attempt", "Why"].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, data.queue.map((j) => el("tr", {}, el("td", {}, j.session_id), el("td", {}, j.state), el("td", {}, j.client || "—"),
        el("td", {}, j.transcript), el("td", { class: "num" }, j.attempts), el("td", {}, when(j.next_attempt_at)), el("td", {}, j.last_error || "—")))))
    : el("p", { class: "muted" }, "The queue is empty.");
  const retry = el("button", {
    type: "button", disabled: !failed, onclick: async () => {
      try {
        const answer = await api("/api/queue/retry", {});
        await state.render();
        notify(`Requeued ${answer.requeued} job(s).`);
      } catch (error) { notify(error.message, "error"); }
    },
  }, `Retry failed (${failed})`);

  const spend = data.spend;
  const bar = (tokens, budget) => {
    if (!budget) return el("span", { class: "muted" }, "no budget");
    const share = Math.min(1, tokens / budget);
    const fill = el("span", {});
    fill.style.width = `${(share * 100).toFixed(1)}%`;
    return el("div", { class: `bar${tokens > budget ? " over" : ""}`, role: "img", "aria-label": `${tokens} of ${budget} tokens` }, fill);
  };
  const spendRows = spend.backends.map((b) => el("tr", {}, el("td", {}, b.backend), el("td", { class: "num" }, b.tokens),
    el("td", { class: "num" }, b.budget ?? "—"), el("td", {}, b.budget_kind), el("td", {}, bar(b.tokens, b.budget))));
  const loop = data.loop;
  render(
    el("h1", {}, "Sessions"),
    message,
    el("div", { class: "figures" },
      el("div", {}, el("strong", {}, loop.sessions), "sessions given a recall"),
      el("div", {}, el("strong", {}, loop.plan_recall_share === null ? "—" : `${Math.round(loop.plan_recall_share * 100)}%`), "got a plan recall"),
      el("div", {}, el("strong", {}, Object.values(loop.verdicts).reduce((a, b) => a + b, 0)), "verdicts")),
    el("h2", {}, "Recent sessions"), ...sessions,
    el("h2", {}, "Distillation queue"), el("div", { class: "actions" }, retry), queue,
    el("h2", {}, `Spend today (${spend.day}, UTC)`),
    el("p", {}, `Daily budget: ${spend.daily.tokens} of ${spend.daily.budget} tokens `, bar(spend.daily.tokens, spend.daily.budget)),
    spend.backends.length
      ? el("table", { "aria-label": "Spend by backend" },
        el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "Backend"), el("th", { scope: "col", class: "num" }, "Tokens"),
          el("th", { scope: "col", class: "num" }, "Budget"), el("th", { scope: "col" }, "Which budget"), el("th", { scope: "col" }, "Used"))),
        el("tbody", {}, spendRows))
      : el("p", { class: "muted" }, "Nothing spent today."));
}

// -- upkeep: consolidation runs -------------------------------------------------------------

const CHANGE_HEADINGS = { merged: "Merged", superseded: "Superseded", retired: "Retired", conflict: "Conflicts flagged" };

function runSummary(run) {
  const merged = run.merged.reduce((total, [, members]) => total + members.length, 0);
  return `merged ${merged} wordings into ${run.merged.length}, ${run.superseded.length} superseded, ` +
    `${run.retired.length} retired, ${run.conflicts.length} conflicts`;
}

function changeItem(change) {
  const title = (id) => change.titles[id] || id;
  const main = insightLink(change.id, title(change.id));
  const others = change.others.map((id, n) => [n ? ", " : "", insightLink(id, title(id))]);
  const what = {
    merged: [main, " ← ", others],
    superseded: [main, " superseded by ", others],
    retired: [main],
    conflict: [main, " against ", others],
  }[change.kind];
  return el("li", { class: `change ${change.kind}` }, what, el("div", { class: "muted" }, change.why));
}

function changeLists(run) {
  return Object.entries(CHANGE_HEADINGS).map(([kind, heading]) => {
    const found = run.changes.filter((c) => c.kind === kind);
    return found.length ? [el("h3", {}, `${heading} (${found.length})`), el("ul", {}, found.map(changeItem))] : null;
  });
}

async function upkeepPage() {
  const data = await api("/api/consolidation");
  const message = messageBox();
  const pass = (dryRun) => () => acting(async () => {
    try {
      const run = await api("/api/consolidation/run", { dry_run: dryRun });
      if (dryRun) {
        state.preview = run;
        await state.render();
        notify(run.changes.length ? `A pass would have: ${runSummary(run)}.` : "A pass would change nothing.");
      } else {
        state.preview = null;
        await state.render();
        notify(run.changes.length ? `${run.run}: ${runSummary(run)}.` : "Nothing to consolidate.");
      }
    } catch (error) { notify(error.message, "error"); }
  });
  const undo = (run) => async () => {
    if (!await confirmDialog("Undo this run?", `Every change of ${run.run} is taken back: merged insights come back, retired ones are active again. What happened since stays.`, "Undo")) return;
    await acting(async () => {
      try {
        await api(`/api/consolidation/${encodeURIComponent(run.run)}/undo`, { confirm: run.run });
        await state.render();
        notify(`Undid ${run.run}.`);
      } catch (error) { notify(error.message, "error"); }
    });
  };
  const preview = state.preview && state.preview.changes.length
    ? el("section", { id: "preview", "aria-label": "What a pass would change" }, el("h2", {}, "A pass would change"), changeLists(state.preview))
    : null;
  const conflicts = data.conflicts.length
    ? el("ul", { id: "conflicts" }, data.conflicts.map(changeItem))
    : el("p", { class: "muted" }, "No open conflict.");
  const runs = data.runs.length ? data.runs.map((run) => el("details", { class: "run", id: `run-${run.run}` },
    el("summary", {}, `${when(run.at)} · ${run.source} · ${run.trigger} · ${runSummary(run)}`,
      run.undone_at ? el("span", { class: "badge retired" }, "undone") : null,
      el("span", { class: "muted" }, ` (${run.run})`)),
    changeLists(run),
    run.undone_at ? el("p", { class: "muted" }, `Undone ${when(run.undone_at)}.`)
      : el("div", { class: "actions" }, el("button", { type: "button", class: "danger", onclick: undo(run) }, "Undo this run"))))
    : [el("p", { class: "muted" }, "No consolidation run yet.")];
  render(
    el("h1", {}, "Upkeep"),
    message,
    el("p", {}, "Consolidation merges wordings of one lesson into the best of them, retires lessons a later one supersedes ",
      `lessons no session used for ${data.retire_unused_days || "∞"} days and new wordings of lessons retired as wrong, and flags contradictions for you. `,
      "Nothing is deleted; every run can be undone. ",
      data.idle_seconds ? `The service runs a pass after ${Math.round(data.idle_seconds / 60)} idle minutes, at most every ${data.every_hours} hours.` : "The service never runs one by itself."),
    el("div", { class: "actions" },
      el("button", { type: "button", onclick: pass(true) }, "Preview a pass"),
      el("button", { type: "button", class: "primary", onclick: pass(false) }, "Run a pass now")),
    preview,
    el("h2", {}, "Contradictions to settle"),
    el("p", { class: "muted" }, "Never settled for you: keep both if each holds in its own scope, else retire or edit one."),
    conflicts,
    el("h2", {}, "Runs"), ...runs);
}

// -- map ------------------------------------------------------------------------------------

const PALETTE = ["#3b82f6", "#f59e0b", "#10b981", "#ef4444", "#8b5cf6", "#ec4899", "#14b8a6", "#f97316",
  "#6366f1", "#84cc16", "#06b6d4", "#a855f7", "#eab308", "#22c55e", "#e11d48", "#0ea5e9"];
let colourBy = "domain";

async function mapPage() {
  const data = await api("/api/map");
  const canvas = el("canvas", { class: "map", tabindex: 0, role: "application",
    "aria-label": "Map of the insights. Arrow keys move between dots, Enter opens one." });
  const label = el("p", { id: "map-focus", "aria-live": "polite", class: "muted" }, "Click a dot, or focus the map and use the arrow keys.");
  const legend = el("ul", { class: "legend", "aria-label": "Legend" });
  const colourSelect = select("colour", "Colour by", ["domain", "category"], colourBy);
  let chosen = -1;
  const points = data.points;

  const colours = () => {
    const keys = [...new Set(points.map((p) => p[colourBy]))].sort();
    return Object.fromEntries(keys.map((k, n) => [k, PALETTE[n % PALETTE.length]]));
  };
  const bounds = () => {
    const xs = points.map((p) => p.x), ys = points.map((p) => p.y);
    return { x0: Math.min(...xs), x1: Math.max(...xs), y0: Math.min(...ys), y1: Math.max(...ys) };
  };
  let place = () => [0, 0];
  const draw = () => {
    const ratio = window.devicePixelRatio || 1;
    const width = canvas.clientWidth, height = canvas.clientHeight;
    canvas.width = width * ratio; canvas.height = height * ratio;
    const ctx = canvas.getContext("2d");
    ctx.scale(ratio, ratio);
    ctx.clearRect(0, 0, width, height);
    if (!points.length) return;
    const b = bounds(), pad = 16;
    const sx = (width - 2 * pad) / ((b.x1 - b.x0) || 1), sy = (height - 2 * pad) / ((b.y1 - b.y0) || 1);
    place = (p) => [pad + (p.x - b.x0) * sx, height - pad - (p.y - b.y0) * sy];
    const palette = colours();
    const radius = points.length > 2000 ? 2.5 : 4.5;
    points.forEach((p, n) => {
      const [x, y] = place(p);
      ctx.beginPath();
      ctx.arc(x, y, n === chosen ? radius + 3 : radius, 0, 2 * Math.PI);
      ctx.fillStyle = palette[p[colourBy]];
      ctx.fill();
      if (n === chosen) { ctx.lineWidth = 2; ctx.strokeStyle = getComputedStyle(document.body).color; ctx.stroke(); }
    });
    legend.replaceChildren(...Object.entries(palette).map(([k, c]) => {
      const swatch = el("span", { class: "swatch" });
      swatch.style.background = c;
      return el("li", {}, swatch, k);
    }));
  };
  const focusPoint = (n) => {
    chosen = n;
    draw();
    const p = points[n];
    label.textContent = `${p.title} — ${p.domain}, ${p.category} (Enter opens it)`;
  };
  const nearest = (event) => {
    const box = canvas.getBoundingClientRect();
    const mx = event.clientX - box.left, my = event.clientY - box.top;
    let best = -1, bestDistance = 144;
    points.forEach((p, n) => {
      const [x, y] = place(p);
      const d = (x - mx) ** 2 + (y - my) ** 2;
      if (d < bestDistance) { best = n; bestDistance = d; }
    });
    return best;
  };
  canvas.addEventListener("click", (event) => {
    const n = nearest(event);
    if (n >= 0) location.hash = `#/insight/${encodeURIComponent(points[n].id)}`;
  });
  canvas.addEventListener("mousemove", (event) => {
    const n = nearest(event);
    canvas.title = n >= 0 ? points[n].title : "";
  });
  canvas.addEventListener("keydown", (event) => {
    if (!points.length) return;
    if (event.key === "ArrowRight" || event.key === "ArrowDown") focusPoint((chosen + 1) % points.length);
    else if (event.key === "ArrowLeft" || event.key === "ArrowUp") focusPoint((chosen - 1 + points.length) % points.length);
    else if (event.key === "Enter" && chosen >= 0) location.hash = `#/insight/${encodeURIComponent(points[chosen].id)}`;
    else return;
    event.preventDefault();
  });
  colourSelect.querySelector("select").addEventListener("change", (event) => { colourBy = event.target.value; draw(); });

  render(
    el("h1", {}, "Map"),
    el("div", { class: "figures" },
      el("div", {}, el("strong", { id: "lisi" }, fmt(data.lisi, 2)), "LISI (domains mixed; higher is more abstract)"),
      el("div", {}, el("strong", { id: "dbi" }, fmt(data.dbi, 2)), "Davies–Bouldin (higher: domains overlap)"),
      el("div", {}, el("strong", {}, `${data.shown} / ${data.total}`), "dots shown")),
    data.note ? el("p", { class: "muted" }, data.note) : null,
    el("div", { class: "filters" }, colourSelect),
    el("div", { class: "map-wrap" }, el("div", {}, canvas, label), legend),
    data.most_specific.length ? [el("h2", {}, "Most specific to their domain"),
      el("ul", {}, data.most_specific.map((m) => el("li", {}, insightLink(m.id, m.title), ` — ${m.domain}, specificity ${fmt(m.specificity, 2)}`)))] : null);
  draw();
}

// -- trials ---------------------------------------------------------------------------------

const rate = (value) => (value === null || value === undefined ? "—" : value.toFixed(2));

async function trialsPage(id) {
  if (id) return trialPage(id);
  const data = await api("/api/trials");
  render(
    el("h1", {}, "Trials"),
    el("p", { class: "muted" }, "Does memory help your agent? Run `mtl-mcp trial run --client claude-code` to find out on your own assistant."),
    data.trials.length
      ? el("table", { "aria-label": "Trials" },
        el("thead", {}, el("tr", {}, ["Trial", "When", "Client", "Suite", "Status", "Sessions", "Pass rates", "memory vs none p", "Harms"].map((h) => el("th", { scope: "col" }, h)))),
        el("tbody", {}, data.trials.map((t) => el("tr", {},
          el("td", {}, el("a", { href: `#/trials/${encodeURIComponent(t.id)}` }, t.id)), el("td", {}, when(t.created_at)),
          el("td", {}, t.client), el("td", {}, t.suite + (t.protocol === "transfer" ? " (transfer)" : "")), el("td", {}, t.status),
          el("td", { class: "num" }, `${t.sessions.scored}/${t.sessions.planned}`),
          el("td", {}, Object.entries(t.pass_rates).map(([arm, r]) => `${arm} ${rate(r)}`).join(", ")),
          el("td", { class: "num" }, t.memory_vs_none_p === null ? "—" : fmt(t.memory_vs_none_p, 4)),
          el("td", { class: "num" }, t.harms)))))
      : el("p", { class: "muted" }, "No trial yet."));
}

async function trialPage(id) {
  const data = await api(`/api/trials/${encodeURIComponent(id)}`);
  const report = data.report;
  const message = messageBox();
  const arms = Object.keys(report.arms);
  const armRows = arms.map((arm) => {
    const a = report.arms[arm];
    return el("tr", {}, el("th", { scope: "row" }, arm), el("td", { class: "num" }, `${a.passed}/${a.runs}`), el("td", { class: "num" }, rate(a.pass_rate)),
      el("td", {}, `${fmt(a.wilson95[0], 2)} – ${fmt(a.wilson95[1], 2)}`), el("td", { class: "num" }, a.tokens), el("td", { class: "num" }, Math.round(a.seconds)),
      el("td", { class: "num" }, arm === "none" || a.notes_shown_per_run === null ? "—" : a.notes_shown_per_run));
  });
  const comparisons = Object.entries(report.comparisons).map(([name, c]) => el("tr", {}, el("th", { scope: "row" }, name.replaceAll("_", " ")),
    el("td", { class: "num" }, c.helped), el("td", { class: "num" }, c.hurt), el("td", { class: "num" }, c.pairs), el("td", { class: "num" }, fmt(c.p, 4)),
    el("td", {}, c.significant ? "significant at 0.05" : "not significant")));
  const retire = async (insightId, task) => {
    try {
      await api(`/api/insights/${encodeURIComponent(insightId)}/retire`, { reason: `harmed ${task} in trial ${report.id}` });
      await state.render();
      notify(`Retired ${insightId}; restore it from its page if you change your mind.`);
    } catch (error) { notify(error.message, "error"); }
  };
  const harms = report.harms.length
    ? el("table", { "aria-label": "Harms" },
      el("thead", {}, el("tr", {}, ["Task", "What memory showed there", ""].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, report.harms.flatMap((h) => (h.insights.length ? h.insights : [null]).map((insightId, n) => {
        const note = insightId ? data.insights[insightId] : null;
        return el("tr", {}, el("td", {}, n ? "" : h.task),
          el("td", {}, note ? [insightLink(note.id, note.title || note.id), " ", el("code", {}, `mtl-mcp show ${note.id}`)] : el("span", { class: "muted" }, "no note was shown")),
          el("td", {}, note && note.status === "active" && note.own
            ? el("button", { type: "button", onclick: () => retire(note.id, h.task) }, "Retire")
            : el("span", { class: "muted" }, note ? note.status : "")));
      }))))
    : el("p", { class: "muted" }, "No task failed with memory where it passed without.");
  const overhead = report.overhead;
  const overheadText = (f) => (f.ratio === null ? "—" : `×${fmt(f.ratio, 2)}${f.low === null ? "" : ` (95% ${fmt(f.low, 2)}–${fmt(f.high, 2)})`}`);
  render(
    el("h1", {}, `Trial ${report.id}`),
    message,
    el("p", {}, `${report.client} ${report.client_version || ""}, suite ${report.suite}, protocol ${report.protocol}: ${report.status}`,
      report.stop_reason ? ` (${report.stop_reason})` : ""),
    el("h2", {}, "Arms"),
    el("table", { "aria-label": "Arms" },
      el("thead", {}, el("tr", {}, ["Arm", "Passed", "Rate", "95% (Wilson)", "Tokens", "Seconds", "Notes shown a session"].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, armRows)),
    el("h2", {}, "Paired comparisons (exact McNemar)"),
    el("table", { "aria-label": "Comparisons" },
      el("thead", {}, el("tr", {}, ["Comparison", "Helped", "Hurt", "Pairs", "p", ""].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, comparisons)),
    overhead ? el("p", {}, `Overhead, memory / none: tokens ${overheadText(overhead.tokens)}, time ${overheadText(overhead.seconds)}.`) : null,
    el("h2", {}, "Harms: memory failed where none passed"), harms,
    el("h2", {}, "Tasks"),
    el("table", { "aria-label": "Tasks" },
      el("thead", {}, el("tr", {}, ["Task", "Domain", ...arms].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, report.tasks.map((t) => el("tr", {}, el("td", {}, t.id), el("td", {}, t.domain),
        arms.map((arm) => el("td", {}, t.results[arm].map((v) => (v === null ? "—" : v ? "pass" : "fail")).join(" "))))))),
    report.no_room.length ? [el("h2", {}, "No room to show an effect"), el("ul", {}, report.no_room.map((r) => el("li", {}, `${r.task}: ${r.outcome}`)))] : null,
    report.caveats.map((c) => el("p", { class: "muted" }, c)));
}

// -- live -----------------------------------------------------------------------------------

async function changed() {
  const live = document.getElementById("live");
  const stamp = new Date().toLocaleTimeString();
  if (state.dirty) {
    live.textContent = `memory changed at ${stamp}; save or leave to see it`;
    return;
  }
  if (document.getElementById("confirm").open || state.acting) return;
  await state.render();
  live.textContent = `updated ${stamp}`;
  live.classList.add("flash");
  setTimeout(() => live.classList.remove("flash"), 1500);
}

// Server-Sent Events read through fetch (EventSource cannot send the session header).
async function listen() {
  const live = document.getElementById("live");
  for (;;) {
    try {
      const response = await fetch("/api/events", { credentials: "omit", headers: { [SESSION_HEADER]: state.session } });
      if (response.status === 401) {
        live.textContent = "closed: this dashboard is gone";
        return;
      }
      if (!response.ok || !response.body) throw new Error(`error ${response.status}`);
      live.textContent = "live";
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const lines = buffer.slice(0, end).split("\n");
          buffer = buffer.slice(end + 2);
          if (lines.includes("event: change")) await changed();
        }
      }
    } catch {
      // the service restarted the feed, or the network hiccuped: try again shortly
    }
    live.textContent = "reconnecting…";
    await new Promise((resolve) => setTimeout(resolve, 2000));
  }
}

// A one-time launch code in the URL is traded for the session once, then leaves the URL
// (and the history entry); without one, the tab's own session from before (a reload).
async function signIn() {
  const url = new URL(location.href);
  const code = url.searchParams.get("code");
  if (code !== null) {
    url.searchParams.delete("code");
    history.replaceState(null, "", url.pathname + url.search + url.hash);
    try {
      const session = await api("/api/session", { code });
      sessionStorage.setItem(SESSION_KEY, session.session);
      state.session = session.session;
      return session;
    } catch (error) {
      if (!(error instanceof SessionError) || !sessionStorage.getItem(SESSION_KEY)) throw error;
    }
  }
  state.session = sessionStorage.getItem(SESSION_KEY);
  if (!state.session) throw new SessionError("This tab has no session of this dashboard: run `mtl-mcp ui` again for a new one-time link to it.");
  return api("/api/session");
}

function showSignedOut(error) {
  sessionStorage.removeItem(SESSION_KEY);
  state.session = null;
  document.getElementById("live").textContent = "not connected";
  render(el("h1", {}, "Open a new link to the dashboard"),
    el("p", { class: "error", role: "alert" }, error.message),
    el("p", { class: "muted" }, "Each link opens one tab, once. A reload keeps the tab's session; another tab or browser needs a new link."));
}

async function start() {
  try {
    const session = await signIn();
    state.options = session.options;
    state.team = session.team;
  } catch (error) {
    if (error instanceof SessionError) showSignedOut(error);
    else showError(error);
    return;
  }
  window.addEventListener("hashchange", () => route());
  await route(false);
  performance.mark("mtl-first-page-usable"); // what bench/dashboard.py times from navigation
  listen();
}

start();
