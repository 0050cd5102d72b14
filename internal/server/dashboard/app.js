// petrel dashboard: polls /stats/series (the relay's /stats figures, one
// sample a second) and draws the last 15 minutes as SVG charts. Every
// chart writes what it drew into data attributes (data-max, data-points,
// and per line data-last and data-max), which the browser test reads.
'use strict';
(function () {
  const WINDOW = 15 * 60 * 1000; // what the charts show, ms
  const LAT = 10;                // latency percentiles over this many samples
  const POLL = 1000;             // ms between polls
  const REASONS = ['invalid', 'duplicate', 'blocked', 'rate-limited', 'pow', 'restricted', 'auth-required', 'mute', 'error'];

  const S = { t: [], cols: {}, fields: [], bounds: {}, scale: {}, last: 0 };

  // Series kinds: a counter's rate per second, a gauge, a latency
  // percentile in ms.
  const rate = (f) => (i) => {
    if (i === 0) return null;
    const c = S.cols[f], dt = S.t[i] - S.t[i - 1];
    if (!c || dt <= 0) return null;
    return Math.max(0, c[i] - c[i - 1]) * 1000 / dt;
  };
  const gauge = (f) => (i) => { const c = S.cols[f]; return c ? c[i] : null; };
  const pct = (h, q) => (i) => {
    const j = Math.max(0, i - LAT), b = S.bounds[h];
    const n = S.cols[h + '.count'];
    if (!b || !n || i === j) return null;
    const count = n[i] - n[j];
    if (count <= 0) return null;
    const cum = b.map((_, k) => S.cols[h + '.bucket_counts.' + k][i] - S.cols[h + '.bucket_counts.' + k][j]);
    return quantile(q, b, cum, count) * 1000;
  };
  const times = (f, k) => (i) => { const v = f(i); return v === null ? null : v * k; };
  const sum = (fs) => (i) => {
    let v = null;
    for (const f of fs) { const x = f(i); if (x !== null) v = (v || 0) + x; }
    return v;
  };

  // quantile is relay.Quantile (internal/relay/latency.go): Prometheus's
  // histogram_quantile, linear within the bucket the rank falls in.
  function quantile(q, bounds, cum, count) {
    const rank = q * count;
    let lower = 0, below = 0;
    for (let i = 0; i < bounds.length; i++) {
      if (cum[i] >= rank) {
        const n = cum[i] - below;
        return n === 0 ? bounds[i] : lower + (bounds[i] - lower) * (rank - below) / n;
      }
      lower = bounds[i]; below = cum[i];
    }
    return bounds[bounds.length - 1];
  }

  const BG = 'store_background.', PG = 'store_postgres.', CL = 'cluster.';
  const refused = REASONS.map((r) => ({ name: r, f: rate('events_rejected.' + r), hideZero: true }));
  const CHARTS = [
    { id: 'accepted', title: 'Events accepted per second', fmt: num, lines: [
      { name: 'stored', f: rate('events_accepted') }, { name: 'ephemeral', f: rate('events_ephemeral') }] },
    { id: 'refused', title: 'Events refused per second, by reason', fmt: num, lines: refused },
    { id: 'deliveries', title: 'Deliveries per second', fmt: num, lines: [
      { name: 'live', f: rate('live_deliveries') }, { name: 'stored (REQ)', f: rate('stored_events_sent') }] },
    { id: 'connections', title: 'Connections and subscriptions', fmt: num, lines: [
      { name: 'connections', f: gauge('connections_active') }, { name: 'subscriptions', f: gauge('subscriptions_active') }] },
    { id: 'churn', title: 'Connections opened and refused per second', fmt: num, lines: [
      { name: 'WebSockets opened', f: rate('connections_total') }, { name: 'refused', f: rate('connections_rejected') }] },
    { id: 'ok-latency', title: 'OK latency (EVENT to OK)', fmt: ms, lines: [
      { name: 'p50', f: pct('ok_latency', 0.5) }, { name: 'p99', f: pct('ok_latency', 0.99) }] },
    { id: 'query-latency', title: 'Stored-query latency (REQ to EOSE)', fmt: ms, lines: [
      { name: 'p50', f: pct('query_latency', 0.5) }, { name: 'p99', f: pct('query_latency', 0.99) }] },
    { id: 'verify-queue', title: 'Verify queue', fmt: num, lines: [
      { name: 'waiting', f: gauge('verify_queue_depth') }, { name: 'capacity', f: gauge('verify_queue_capacity'), dash: true }] },
    { id: 'store-events', title: 'Stored events', fmt: num, lines: [{ name: 'events', f: gauge('store_events') }] },
    { id: 'store-size', title: 'Store size', fmt: bytes, lines: [{ name: 'size', f: gauge('db_size_bytes') },
      { name: 'compaction debt', f: gauge(BG + 'compaction_debt_bytes'), dash: true, needs: BG + 'compaction_debt_bytes' }] },
    // The embedded store's background work (absent with PostgreSQL).
    { id: 'store-writes', title: 'Store: bytes written by flushes and compactions', fmt: byteRate,
      needs: BG + 'flush_bytes', lines: [
        { name: 'flushes', f: rate(BG + 'flush_bytes') }, { name: 'compactions', f: rate(BG + 'compaction_bytes') }] },
    { id: 'store-stalls', title: 'Store: write stalls (time stalled per second)', fmt: ms,
      needs: BG + 'write_stall_seconds', lines: [{ name: 'stalled', f: times(rate(BG + 'write_stall_seconds'), 1000) }] },
    { id: 'store-l0', title: 'Store: level 0 (sublevels and tables)', fmt: num,
      needs: BG + 'l0_sublevels', lines: [
        { name: 'sublevels', f: gauge(BG + 'l0_sublevels') }, { name: 'tables', f: gauge(BG + 'l0_tables'), dash: true }] },
    // The PostgreSQL store's connection pool and write transactions
    // (absent with the embedded store).
    { id: 'pg-pool', title: 'PostgreSQL: connections', fmt: num, needs: PG + 'pool_max_conns', lines: [
      { name: 'in use', f: gauge(PG + 'pool_acquired_conns') }, { name: 'open', f: gauge(PG + 'pool_conns') },
      { name: 'limit', f: gauge(PG + 'pool_max_conns'), dash: true }] },
    { id: 'pg-waits', title: 'PostgreSQL: waits for a connection (time waited per second)', fmt: ms,
      needs: PG + 'pool_acquire_wait_seconds', lines: [{ name: 'waited', f: times(rate(PG + 'pool_acquire_wait_seconds'), 1000) }] },
    { id: 'pg-writes', title: 'PostgreSQL: write transactions per second', fmt: num, needs: PG + 'write_retries', lines: [
      { name: 'committed', f: rate('store_commits') }, { name: 'retried', f: rate(PG + 'write_retries') }] },
    // Many nodes: the NATS bus between them (absent on a single node).
    { id: 'cluster', title: 'Cluster bus: events per second', fmt: num, needs: CL + 'published', lines: [
      { name: 'sent to the other nodes', f: rate(CL + 'published') }, { name: 'received from them', f: rate(CL + 'received') },
      { name: 'caught up from the store', f: rate(CL + 'caught_up_events'), hideZero: true },
      { name: 'bus messages lost', f: rate(CL + 'messages_lost'), hideZero: true }] },
  ];
  const TILES = [
    { id: 'accepted', label: 'accepted /s', f: sum([rate('events_accepted'), rate('events_ephemeral')]), fmt: num },
    { id: 'refused', label: 'refused /s', f: sum(refused.map((l) => l.f)), fmt: num },
    { id: 'deliveries', label: 'deliveries /s', f: rate('live_deliveries'), fmt: num },
    { id: 'connections', label: 'connections', f: gauge('connections_active'), fmt: num },
    { id: 'subscriptions', label: 'subscriptions', f: gauge('subscriptions_active'), fmt: num },
    { id: 'ok-p99', label: 'OK p99, last 10 s', f: pct('ok_latency', 0.99), fmt: ms },
    { id: 'events', label: 'stored events', f: gauge('store_events'), fmt: num },
    { id: 'size', label: 'store size', fmt: bytes, f: gauge('db_size_bytes') },
    { id: 'stalls', label: 'store write stalls', f: gauge(BG + 'write_stalls'), fmt: num, needs: BG + 'write_stalls' },
    { id: 'bus', label: 'cluster bus', f: gauge(CL + 'connected'), fmt: (v) => v === null ? '–' : v ? 'up' : 'down', needs: CL + 'connected' },
    { id: 'nodes', label: 'other nodes', f: gauge(CL + 'origins'), fmt: num, needs: CL + 'origins' },
    { id: 'uptime', label: 'uptime', f: gauge('uptime_seconds'), fmt: dur },
  ];

  // ALERTS are the page's warnings: shown while show is true of the
  // latest sample, with the text text gives.
  const last = (f) => { const c = S.cols[f]; return c && c.length ? c[c.length - 1] : null; };
  const ALERTS = [
    { id: 'reload', show: () => last('config_reloads.last_refused') === 1,
      text: () => 'The last configuration reload was refused (' + num(last('config_reloads.refused')) +
        ' refused since the relay started): the relay runs on the configuration it had before, and a restart would fail on the file as it is now. The log says why; petrel serve --check checks the file.' },
    { id: 'bus', show: () => last(CL + 'connected') === 0,
      text: () => 'This node has lost its connection to the cluster bus (NATS): it goes on accepting and storing events, and other nodes\' events reach its subscribers late, caught up from the store, until the bus is back.' },
    { id: 'busErrors', show: () => lastMinute(CL + 'bus_errors') > 0,
      text: () => 'NATS refused ' + num(lastMinute(CL + 'bus_errors')) + ' of this node\'s bus messages in the last minute (most often its NATS user lacks a subject under the bus\'s, or a message is over the server\'s max_payload): what they carry (rate limits, connection counts, NIP-86 changes) is not shared with the other nodes. The log\'s "cluster: NATS error" and "message not sent" lines say which.' },
  ];
  // lastMinute is how much a counter grew over the last 60 samples.
  function lastMinute(f) {
    const c = S.cols[f];
    return c && c.length > 1 ? c[c.length - 1] - c[Math.max(0, c.length - 61)] : 0;
  }

  function num(v) {
    if (v === null || v === undefined) return '–';
    const a = Math.abs(v);
    if (a >= 1e9) return (v / 1e9).toFixed(2) + 'G';
    if (a >= 1e6) return (v / 1e6).toFixed(2) + 'M';
    if (a >= 1e4) return (v / 1e3).toFixed(1) + 'k';
    if (a >= 100 || Number.isInteger(v)) return Math.round(v).toString();
    return v.toFixed(a >= 10 ? 1 : 2);
  }
  function byteRate(v) { return v === null ? '–' : bytes(v) + '/s'; }
  function ms(v) { return v === null ? '–' : (v >= 100 ? Math.round(v) : v.toFixed(v >= 10 ? 1 : 2)) + ' ms'; }
  function bytes(v) {
    if (v === null) return '–';
    const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
    return (i ? v.toFixed(v >= 100 ? 0 : 1) : v) + ' ' + u[i];
  }
  function dur(s) {
    if (s === null) return '–';
    const d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60);
    return d ? d + 'd ' + h + 'h' : h ? h + 'h ' + m + 'm' : m + 'm ' + Math.floor(s % 60) + 's';
  }
  // nice rounds a maximum up to 1, 2 or 5 times a power of ten.
  function nice(v) {
    if (!(v > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v))), m = v / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }

  const NS = 'http://www.w3.org/2000/svg';
  function el(tag, attrs, parent, ns) {
    const e = ns ? document.createElementNS(NS, tag) : document.createElement(tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  const W = 600, H = 140;

  function build() {
    const tiles = document.getElementById('tiles');
    for (const t of TILES) {
      t.d = el('div', { class: 'tile', id: 'tile-' + t.id }, tiles);
      t.v = el('b', {}, t.d);
      el('span', {}, t.d).textContent = t.label;
    }
    const charts = document.getElementById('charts');
    for (const c of CHARTS) {
      c.fig = el('figure', { class: 'chart', id: 'chart-' + c.id }, charts);
      el('figcaption', {}, c.fig).textContent = c.title;
      const plot = el('div', { class: 'plot' }, c.fig);
      const svg = el('svg', { viewBox: '0 0 ' + W + ' ' + H, preserveAspectRatio: 'none', role: 'img', 'aria-label': c.title }, plot, true);
      for (const y of [0.25, 0.5, 0.75]) el('line', { class: 'grid', x1: 0, x2: W, y1: H * y, y2: H * y }, svg, true);
      c.ymax = el('span', { class: 'ymax' }, plot);
      const xa = el('div', { class: 'xaxis' }, c.fig);
      for (const l of ['−15 min', '−10', '−5', 'now']) el('span', {}, xa).textContent = l;
      const legend = el('div', { class: 'legend' }, c.fig);
      c.lines.forEach((l, k) => {
        l.path = el('path', { class: 'c' + (k % 9) + (l.dash ? ' dash' : ''), 'data-line': l.name }, svg, true);
        l.key = el('span', { class: 'c' + (k % 9) }, legend);
        el('i', {}, l.key);
        l.key.appendChild(document.createTextNode(l.name + ' '));
        l.val = el('b', {}, l.key);
      });
    }
  }

  function draw() {
    const n = S.t.length, now = n ? S.t[n - 1] : Date.now(), t0 = now - WINDOW;
    let first = 0;
    while (first < n && S.t[first] < t0) first++;
    for (const c of CHARTS) {
      const vals = c.lines.map((l) => { const a = []; for (let i = first; i < n; i++) a.push(l.f(i)); return a; });
      let max = 0;
      vals.forEach((a) => a.forEach((v) => { if (v !== null && v > max) max = v; }));
      const top = nice(max);
      c.lines.forEach((l, k) => {
        let d = '', pen = false, lmax = 0, last = null;
        vals[k].forEach((v, j) => {
          if (v === null) { pen = false; return; }
          const x = (S.t[first + j] - t0) / WINDOW * W, y = H - v / top * H;
          d += (pen ? 'L' : 'M') + x.toFixed(1) + ' ' + y.toFixed(1);
          pen = true; last = v; if (v > lmax) lmax = v;
        });
        l.path.setAttribute('d', d);
        l.path.setAttribute('data-last', last === null ? '' : last);
        l.path.setAttribute('data-max', lmax);
        l.val.textContent = c.fmt(last);
        l.key.hidden = (!!l.hideZero && lmax === 0) || (!!l.needs && !S.cols[l.needs]);
      });
      c.fig.hidden = !!c.needs && !S.cols[c.needs];
      c.ymax.textContent = c.fmt(top);
      c.fig.setAttribute('data-max', max);
      c.fig.setAttribute('data-points', n - first);
    }
    const shown = ALERTS.filter((a) => a.show());
    alertEl.hidden = !shown.length;
    alertEl.textContent = shown.map((a) => a.text()).join(' ');
    alertEl.dataset.alerts = shown.map((a) => a.id).join(' ');
    for (const t of TILES) {
      const v = n ? t.f(n - 1) : null;
      t.v.textContent = t.fmt(v);
      t.v.setAttribute('data-value', v === null ? '' : v);
      t.d.hidden = !!t.needs && !S.cols[t.needs];
    }
  }

  // ingest appends a /stats/series document: columns delta-encoded.
  function ingest(doc) {
    if (!S.fields.length) {
      S.fields = doc.fields; S.bounds = doc.bucket_bounds_seconds; S.scale = doc.scale || {};
      for (const f of doc.fields) S.cols[f] = [];
    }
    // Each document's first value is absolute, the others differences;
    // a scaled field is divided back into its /stats unit.
    let t = 0;
    doc.t.forEach((d, i) => { t = i === 0 ? d : t + d; S.t.push(t); });
    doc.fields.forEach((f, k) => {
      const c = S.cols[f], col = doc.columns[k], sc = S.scale[f] || 1;
      let v = 0;
      col.forEach((d, i) => { v = i === 0 ? d : v + d; c.push(v / sc); });
    });
    if (S.t.length) S.last = S.t[S.t.length - 1];
    // Keep the window plus what the latency percentiles look back on.
    let drop = 0;
    while (drop < S.t.length - LAT - 2 && S.t[drop + LAT + 1] < S.last - WINDOW) drop++;
    if (drop) { S.t.splice(0, drop); for (const f of S.fields) S.cols[f].splice(0, drop); }
  }

  const main = document.getElementById('dash'), status = document.getElementById('status'),
    alertEl = document.getElementById('alert');
  async function poll() {
    try {
      const r = await fetch('/stats/series?after=' + S.last, { cache: 'no-store' });
      if (!r.ok) throw new Error('/stats/series answered HTTP ' + r.status);
      ingest(await r.json());
      draw();
      main.dataset.state = 'live';
      status.textContent = 'Live: one sample a second, the last 15 minutes. Updated ' + new Date(S.last).toLocaleTimeString() + '.';
    } catch (e) {
      main.dataset.state = 'error';
      status.textContent = 'No figures: ' + e.message + ' (retrying).';
    }
    setTimeout(poll, POLL);
  }
  build();
  poll();
})();
