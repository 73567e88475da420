// Switchboard dashboard: plain JavaScript, no build step.
//
// Data comes from one EventSource (/ui/stream): a `snapshot` (hub, config,
// every service, the latest tick, 15 minutes of history), then `actions`
// (catalog actions, one JSON-RPC `action` message per line), a `tick` every
// second (totals, rates, connections), and `resync` when the page fell
// behind (the hub then ends the stream; EventSource reconnects and a new
// snapshot replaces everything).
//
// Whatever a client wrote (metadata, labels) reaches the page through
// `textContent` and `title` only, never as HTML.
"use strict";
(() => {
  const $ = (id) => document.getElementById(id);
  const ROW = 26; // px, as --row in style.css
  const HISTORY = 900; // points, as the hub keeps

  // ---- formatting ---------------------------------------------------------
  const fmtInt = (n) => (n == null ? "–" : Math.round(n).toLocaleString("en-US"));
  const fmtRate = (n) => {
    if (n == null) return "–";
    if (n >= 1e6) return (n / 1e6).toFixed(2) + " M";
    if (n >= 1e4) return (n / 1e3).toFixed(1) + " k";
    if (n >= 100) return fmtInt(n);
    return String(Math.round(n * 10) / 10);
  };
  const fmtBytes = (n) => {
    if (n == null) return "–";
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i === 0 ? String(Math.round(n)) : n.toFixed(n >= 100 ? 0 : 1)) + " " + units[i];
  };
  const fmtDuration = (s) => {
    if (s == null) return "–";
    s = Math.max(0, Math.floor(s));
    const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600),
      m = Math.floor((s % 3600) / 60), r = s % 60;
    if (d) return `${d}d ${h}h`;
    if (h) return `${h}h ${m}m`;
    if (m) return `${m}m ${r}s`;
    return `${r}s`;
  };
  const fmtMs = (ms) => {
    if (ms == null) return "–";
    if (ms < 1) return Math.round(ms * 1000) + " µs";
    if (ms < 1000) return (ms < 10 ? ms.toFixed(2) : Math.round(ms)) + " ms";
    return (ms / 1000).toFixed(2) + " s";
  };
  const principalLabel = (p) => {
    if (!p || typeof p !== "object") return "–";
    return p.kind === "reserved" ? String(p.module_id) : String(p.kind);
  };
  const text = (v) => {
    if (v == null) return "";
    return typeof v === "string" ? v : JSON.stringify(v);
  };
  const el = (tag, cls, content) => {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (content != null) node.textContent = content;
    return node;
  };

  // ---- a virtualised, sortable, searchable table --------------------------
  // Only the rows in view exist in the DOM (a pool reused on scroll), so
  // 10,000 services cost as much to show as 20.
  class VirtualTable {
    constructor(root, columns, { visibleRows = 16, countEl, sort, search }) {
      this.columns = columns;
      this.rows = [];
      this.view = [];
      this.query = "";
      this.sort = sort || { key: null, dir: 1 };
      this.countEl = countEl;
      this.searchText = search;
      const template = columns.map((c) => c.width || "1fr").join(" ");
      this.head = el("div", "thead");
      this.head.style.gridTemplateColumns = template;
      this.headCells = columns.map((c) => {
        const cell = el("span", c.num ? "num" : "", c.title);
        cell.addEventListener("click", () => this.sortBy(c.key));
        this.head.appendChild(cell);
        return cell;
      });
      this.visibleRows = visibleRows;
      this.viewport = el("div", "viewport");
      this.viewport.style.height = visibleRows * ROW + "px";
      this.spacer = el("div", "spacer");
      this.viewport.appendChild(this.spacer);
      this.empty = el("div", "empty", "nothing here yet");
      this.template = template;
      this.pool = [];
      root.replaceChildren(this.head, this.viewport, this.empty);
      this.viewport.addEventListener("scroll", () => this.paint(), { passive: true });
      this.markSort();
    }
    sortBy(key) {
      this.sort = this.sort.key === key ? { key, dir: -this.sort.dir } : { key, dir: 1 };
      this.markSort();
      this.refresh();
    }
    markSort() {
      this.columns.forEach((c, i) => {
        const cell = this.headCells[i];
        if (c.key === this.sort.key) cell.dataset.sort = this.sort.dir > 0 ? "asc" : "desc";
        else delete cell.dataset.sort;
      });
    }
    setRows(rows) { this.rows = rows; this.refresh(); }
    setQuery(query) {
      this.query = query.trim().toLowerCase();
      this.viewport.scrollTop = 0;
      this.refresh();
    }
    refresh() {
      let view = this.rows;
      if (this.query) {
        const words = this.query.split(/\s+/);
        view = view.filter((r) => {
          const hay = this.searchText(r);
          return words.every((w) => hay.includes(w));
        });
      }
      const column = this.columns.find((c) => c.key === this.sort.key);
      if (column) {
        const value = column.sortValue || column.text;
        const dir = this.sort.dir;
        view = view
          .map((r) => [value(r), r])
          .sort((a, b) => (a[0] < b[0] ? -dir : a[0] > b[0] ? dir : 0))
          .map((pair) => pair[1]);
      }
      this.view = view;
      this.spacer.style.height = view.length * ROW + "px";
      // As tall as its rows, up to `visibleRows`; then it scrolls.
      this.viewport.style.height = Math.max(1, Math.min(view.length, this.visibleRows)) * ROW + "px";
      this.empty.hidden = view.length > 0;
      this.viewport.hidden = view.length === 0;
      if (this.countEl) {
        this.countEl.textContent = this.query
          ? `${fmtInt(view.length)} of ${fmtInt(this.rows.length)}`
          : fmtInt(this.rows.length);
      }
      this.paint();
    }
    rowElement(i) {
      if (!this.pool[i]) {
        const row = el("div", "row");
        row.style.gridTemplateColumns = this.template;
        for (const c of this.columns) row.appendChild(el("span", c.num ? "num" : c.mono ? "mono" : ""));
        this.spacer.appendChild(row);
        this.pool[i] = row;
      }
      return this.pool[i];
    }
    paint() {
      const first = Math.max(0, Math.floor(this.viewport.scrollTop / ROW) - 2);
      const count = Math.ceil((this.viewport.clientHeight || 400) / ROW) + 4;
      for (let i = 0; i < Math.max(count, this.pool.length); i++) {
        const index = first + i;
        const row = this.rowElement(i);
        const data = this.view[index];
        if (i >= count || !data) { row.hidden = true; continue; }
        row.hidden = false;
        row.style.top = index * ROW + "px";
        this.columns.forEach((c, k) => {
          const value = c.text(data);
          const cell = row.children[k];
          if (cell.textContent !== value) {
            cell.textContent = value;
            cell.title = value;
          }
        });
      }
    }
  }

  // ---- services -----------------------------------------------------------
  const services = new Map(); // serviceId -> row
  let serverSeq = 0;
  let order = 0;

  const serviceRow = (s) => {
    const meta = s.metadata && typeof s.metadata === "object" ? s.metadata : {};
    const row = {
      id: String(s.serviceId),
      clientId: text(s.clientId),
      principal: principalLabel(s.principal),
      hub: s.hub == null ? "local" : text(s.hub),
      label: text(meta.label),
      protocol: text(meta.protocol),
      metadata: JSON.stringify(s.metadata),
      order: order++,
    };
    row.search = [row.id, row.clientId, row.principal, row.hub, row.metadata].join(" ").toLowerCase();
    return row;
  };

  const serviceTable = new VirtualTable($("services"), [
    { key: "label", title: "label", width: "minmax(120px, 1.4fr)", text: (r) => r.label },
    { key: "protocol", title: "protocol", width: "minmax(80px, 0.8fr)", text: (r) => r.protocol },
    { key: "id", title: "service id", width: "minmax(140px, 1.3fr)", mono: true, text: (r) => r.id },
    { key: "principal", title: "principal", width: "minmax(70px, 0.7fr)", text: (r) => r.principal },
    { key: "clientId", title: "owner client", width: "minmax(140px, 1.2fr)", mono: true, text: (r) => r.clientId },
    { key: "hub", title: "hub", width: "minmax(60px, 0.6fr)", text: (r) => r.hub },
    { key: "metadata", title: "metadata", width: "minmax(160px, 2fr)", mono: true, text: (r) => r.metadata },
    { key: "order", title: "#", width: "56px", num: true, text: (r) => String(r.order + 1), sortValue: (r) => r.order },
  ], { visibleRows: 16, countEl: $("services-count"), sort: { key: "order", dir: 1 }, search: (r) => r.search });

  let servicesDirty = false;
  const servicesChanged = () => {
    if (servicesDirty) return;
    servicesDirty = true;
    requestAnimationFrame(() => {
      servicesDirty = false;
      serviceTable.setRows(Array.from(services.values()));
    });
  };

  const applyAction = (message) => {
    const params = message && message.params;
    if (!params || typeof params.serverSeq !== "number" || params.serverSeq <= serverSeq) return;
    serverSeq = params.serverSeq;
    const action = params.action || {};
    if (action.type === "clientServices/added" && action.service) {
      services.set(String(action.service.serviceId), serviceRow(action.service));
    } else if (action.type === "clientServices/removed") {
      services.delete(String(action.serviceId));
    } else if (action.type === "clientServices/updated") {
      const old = services.get(String(action.serviceId));
      if (old) {
        const fresh = serviceRow({
          serviceId: old.id, clientId: old.clientId, hub: old.hub === "local" ? null : old.hub,
          principal: null, metadata: action.metadata,
        });
        fresh.principal = old.principal;
        fresh.order = old.order;
        fresh.search = [fresh.id, fresh.clientId, fresh.principal, fresh.hub, fresh.metadata].join(" ").toLowerCase();
        services.set(old.id, fresh);
      }
    }
  };

  // ---- connections --------------------------------------------------------
  let previousTick = null;
  const connectionTable = new VirtualTable($("connections"), [
    { key: "client", title: "client id", width: "minmax(150px, 1.4fr)", mono: true, text: (r) => r.client },
    { key: "principal", title: "principal", width: "minmax(70px, 0.7fr)", text: (r) => r.principal },
    { key: "transport", title: "transport", width: "80px", text: (r) => r.transport },
    { key: "services", title: "services", width: "64px", num: true, text: (r) => fmtInt(r.services), sortValue: (r) => r.services },
    { key: "inFlight", title: "in flight", width: "64px", num: true, text: (r) => fmtInt(r.inFlight), sortValue: (r) => r.inFlight },
    { key: "queuedBytes", title: "queued", width: "72px", num: true, text: (r) => fmtBytes(r.queuedBytes), sortValue: (r) => r.queuedBytes },
    { key: "inRate", title: "msgs in/s", width: "76px", num: true, text: (r) => fmtRate(r.inRate), sortValue: (r) => r.inRate },
    { key: "outRate", title: "msgs out/s", width: "80px", num: true, text: (r) => fmtRate(r.outRate), sortValue: (r) => r.outRate },
    { key: "messagesIn", title: "msgs in", width: "84px", num: true, text: (r) => fmtInt(r.messagesIn), sortValue: (r) => r.messagesIn },
    { key: "messagesOut", title: "msgs out", width: "84px", num: true, text: (r) => fmtInt(r.messagesOut), sortValue: (r) => r.messagesOut },
    { key: "bytesIn", title: "bytes in", width: "76px", num: true, text: (r) => fmtBytes(r.bytesIn), sortValue: (r) => r.bytesIn },
    { key: "bytesOut", title: "bytes out", width: "76px", num: true, text: (r) => fmtBytes(r.bytesOut), sortValue: (r) => r.bytesOut },
    { key: "drops", title: "drops", width: "60px", num: true, text: (r) => fmtInt(r.drops), sortValue: (r) => r.drops },
    { key: "since", title: "connected", width: "76px", num: true, text: (r) => fmtDuration(r.age), sortValue: (r) => -r.age },
  ], { visibleRows: 10, countEl: $("connections-count"), sort: { key: "since", dir: 1 },
       search: (r) => r.search });

  const showConnections = (tick) => {
    const previous = new Map();
    const dt = previousTick ? (tick.t - previousTick.t) / 1000 : 0;
    if (previousTick) for (const c of previousTick.connections) if (c.clientId) previous.set(c.clientId, c);
    const rows = tick.connections.map((c) => {
      const before = c.clientId && previous.get(c.clientId);
      const rate = (now, then) => (before && dt > 0 ? Math.max(0, now - then) / dt : null);
      const row = {
        client: c.clientId == null ? "(not initialized)" : String(c.clientId),
        principal: principalLabel(c.principal),
        transport: String(c.transport),
        services: c.services, inFlight: c.inFlight + c.calls, queuedBytes: c.queuedBytes,
        messagesIn: c.messagesIn, messagesOut: c.messagesOut, bytesIn: c.bytesIn, bytesOut: c.bytesOut,
        drops: c.drops, age: (tick.t - c.connectedSince) / 1000,
        inRate: before ? rate(c.messagesIn, before.messagesIn) : null,
        outRate: before ? rate(c.messagesOut, before.messagesOut) : null,
      };
      row.search = [row.client, row.principal, row.transport].join(" ").toLowerCase();
      return row;
    });
    connectionTable.setRows(rows);
    previousTick = tick;
  };

  // ---- charts -------------------------------------------------------------
  const COLORS = ["#2364aa", "#e07a1f", "#3a9d5d", "#b3261e", "#7b4fb8", "#8c6d1f", "#1f8c8c", "#c2418d"];
  const history = { t: [], notifications: [], requests: [], bytesIn: [], bytesOut: [], drops: {}, p50: [], p99: [] };
  const charts = [];

  const chart = (id, series, columns, format) => {
    const root = $(id);
    const opts = {
      width: Math.max(200, root.clientWidth),
      height: 150,
      padding: [8, 8, 0, 0],
      cursor: { drag: { x: false, y: false } },
      legend: { live: true },
      scales: { x: { time: true } },
      axes: [
        { stroke: "#888", grid: { stroke: "rgba(128,128,128,0.15)" } },
        { stroke: "#888", size: 66, grid: { stroke: "rgba(128,128,128,0.15)" },
          values: (u, values) => values.map((v) => format(v)) },
      ],
      series: [{}].concat(series.map((name, i) => ({
        label: name, stroke: COLORS[i % COLORS.length], width: 1.5,
        value: (u, v) => format(v), spanGaps: false, points: { show: false },
      }))),
    };
    const plot = new uPlot(opts, [[]].concat(series.map(() => [])), root);
    const entry = { root, plot, columns };
    charts.push(entry);
    new ResizeObserver(() => plot.setSize({ width: Math.max(200, root.clientWidth), height: 150 })).observe(root);
    return entry;
  };

  let dropReasons = [];
  const setupCharts = () => {
    if (charts.length) return;
    chart("chart-notifications", ["forwarded"], () => [history.notifications], fmtRate);
    chart("chart-requests", ["started"], () => [history.requests], fmtRate);
    chart("chart-bytes", ["in", "out"], () => [history.bytesIn, history.bytesOut], (v) => fmtBytes(v));
    chart("chart-drops", dropReasons, () => dropReasons.map((r) => history.drops[r]), fmtRate);
    chart("chart-latency", ["p50", "p99"], () => [history.p50, history.p99], fmtMs);
  };

  const redrawCharts = () => {
    for (const c of charts) {
      const columns = c.columns();
      c.plot.setData([history.t].concat(columns));
      const first = columns[0];
      c.root.dataset.last = String(first.length ? first[first.length - 1] : "");
      c.root.dataset.points = String(history.t.length);
    }
  };

  const trim = (array) => { if (array.length > HISTORY) array.splice(0, array.length - HISTORY); };

  const appendPoint = (tick) => {
    const r = tick.rates;
    if (history.t.length && history.t[history.t.length - 1] >= tick.t / 1000) return;
    history.t.push(tick.t / 1000);
    history.notifications.push(r.notifications);
    history.requests.push(r.requests);
    history.bytesIn.push(r.bytesIn);
    history.bytesOut.push(r.bytesOut);
    for (const reason of dropReasons) history.drops[reason].push(r.drops ? r.drops[reason] || 0 : 0);
    history.p50.push(r.p50Ms);
    history.p99.push(r.p99Ms);
    for (const key of ["t", "notifications", "requests", "bytesIn", "bytesOut", "p50", "p99"]) trim(history[key]);
    for (const reason of dropReasons) trim(history.drops[reason]);
  };

  // ---- header, config -----------------------------------------------------
  let hubInfo = {};
  const summary = (pairs) => {
    const nodes = pairs.map(([label, value]) => {
      const div = el("div");
      div.append(el("dt", null, label), el("dd", null, value));
      return div;
    });
    $("summary").replaceChildren(...nodes);
  };

  const showHeader = (tick) => {
    const r = tick.rates || {};
    const totals = tick.totals || {};
    summary([
      ["version", text(hubInfo.version)],
      ["uptime", fmtDuration(tick.uptimeSeconds)],
      ["pid", text(hubInfo.pid)],
      ["memory", fmtBytes(tick.rssBytes)],
      ["connections", fmtInt(totals.connections)],
      ["services", fmtInt(totals.services)],
      ["notifications/s", fmtRate(r.notifications)],
      ["requests/s", fmtRate(r.requests)],
      ["in/s", fmtBytes(r.bytesIn)],
      ["out/s", fmtBytes(r.bytesOut)],
      ["p99", fmtMs(r.p99Ms)],
      ["in flight", fmtInt(totals.inFlight)],
      ["remote listener", hubInfo.remote == null ? "off" : text(hubInfo.remote)],
      ["modules", moduleSummary(tick.modules || [])],
    ]);
    showModules(tick.modules || []);
  };

  // `3 (2 running, 1 backoff)`, or `none`.
  const moduleSummary = (modules) => {
    if (!modules.length) return "none";
    const counts = new Map();
    for (const m of modules) counts.set(m.state, (counts.get(m.state) || 0) + 1);
    const parts = [...counts].map(([state, n]) => `${n} ${state}`);
    return `${modules.length} (${parts.join(", ")})`;
  };

  // One line per module: its state, pid, uptime, restarts, last exit.
  const showModules = (modules) => {
    $("modules-count").textContent = modules.length ? `(${modules.length})` : "";
    const nodes = modules.map((m) => {
      const div = el("div");
      const facts = [m.state];
      if (m.pid != null) facts.push(`pid ${m.pid}`);
      if (m.uptimeMs != null) facts.push(`up ${fmtDuration(m.uptimeMs / 1000)}`);
      facts.push(`${fmtInt(m.services)} services`, `${fmtInt(m.restarts)} restarts`);
      if (m.lastExit) facts.push(`last exit: ${m.lastExit}`);
      div.append(el("dt", null, text(m.name)), el("dd", null, facts.join(" · ")));
      return div;
    });
    if (!nodes.length) nodes.push(el("p", null, "no [modules.NAME] in the config"));
    $("modules").replaceChildren(...nodes);
  };

  const showConfig = (config) => {
    const pairs = [];
    for (const [name, value] of Object.entries(config.limits || {})) pairs.push([name, fmtInt(value)]);
    const policy = config.policy || {};
    pairs.push(["principals", (policy.principals || []).join(", ") || "(direct only)"]);
    for (const g of policy.grants || []) pairs.push([`grant ${g.from} → ${g.to}`, (g.allow || []).join(", ")]);
    pairs.push(["allowed origins", (policy.allowedOrigins || []).join(", ") || "(none)"]);
    pairs.push(["unverified connections", policy.allowUnverified ? "allowed" : "refused"]);
    pairs.push(["payload logging", config.logPayloads ? "on" : "off"]);
    pairs.push(["config file", config.configFile == null ? "(none: defaults)" : text(config.configFile)]);
    pairs.push(["config reloads", fmtInt(config.reloads)]);
    if (config.dashboard) pairs.push(["login code lifetime", fmtDuration(config.dashboard.loginCodeSeconds)]);
    const nodes = pairs.map(([label, value]) => {
      const div = el("div");
      div.append(el("dt", null, label), el("dd", null, value));
      return div;
    });
    $("config").replaceChildren(...nodes);
  };

  const setStatus = (state, message) => {
    const status = $("status");
    status.dataset.state = state;
    status.textContent = message;
  };

  // ---- the stream ---------------------------------------------------------
  const onSnapshot = (snapshot) => {
    hubInfo = snapshot.hub || {};
    document.title = `Switchboard ${text(hubInfo.version)} · pid ${text(hubInfo.pid)}`;
    showConfig(snapshot.config || {});
    services.clear();
    order = 0;
    for (const s of snapshot.services || []) services.set(String(s.serviceId), serviceRow(s));
    serverSeq = snapshot.serverSeq || 0;
    serviceTable.setRows(Array.from(services.values()));
    const h = snapshot.history || {};
    dropReasons = Object.keys(h.drops || {});
    history.t = (h.t || []).slice();
    for (const key of ["notifications", "requests", "bytesIn", "bytesOut", "p50", "p99"]) history[key] = (h[key] || []).slice();
    history.drops = {};
    for (const reason of dropReasons) history.drops[reason] = h.drops[reason].slice();
    setupCharts();
    redrawCharts();
    previousTick = null;
    if (snapshot.tick) { showHeader(snapshot.tick); showConnections(snapshot.tick); }
    setStatus("live", "live");
  };

  const onTick = (tick) => {
    if (!tick) return;
    showHeader(tick);
    showConnections(tick);
    appendPoint(tick);
    redrawCharts();
  };

  const onActions = (data) => {
    for (const line of data.split("\n")) {
      if (!line) continue;
      try { applyAction(JSON.parse(line)); } catch (error) { /* not ours to fix: skip it */ }
    }
    servicesChanged();
  };

  const connect = () => {
    const source = new EventSource("/ui/stream");
    source.addEventListener("snapshot", (e) => onSnapshot(JSON.parse(e.data)));
    source.addEventListener("actions", (e) => onActions(e.data));
    source.addEventListener("tick", (e) => onTick(JSON.parse(e.data)));
    source.addEventListener("resync", () => setStatus("resync", "fell behind: resyncing…"));
    source.addEventListener("error", () => {
      if (source.readyState === EventSource.CLOSED) {
        setStatus("closed", "disconnected: reload, or log in again with `switchboard dashboard`");
      } else {
        setStatus("connecting", "reconnecting…");
      }
    });
  };

  $("services-search").addEventListener("input", (e) => serviceTable.setQuery(e.target.value));
  $("connections-search").addEventListener("input", (e) => connectionTable.setQuery(e.target.value));
  connect();
})();
