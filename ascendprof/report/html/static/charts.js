/* ascendprof report charts: draws the chart specs embedded in the page (JSON in
   <script id="ascendprof-charts">, made by ascendprof.report.html.common.Chart) with Apache
   ECharts. window.ASCENDPROF keeps the specs (their data is the page's numbers), the drawn
   charts and the selected rank. No network, no build step. */
(function () {
  'use strict';
  const el = document.getElementById('ascendprof-charts');
  const specs = el ? JSON.parse(el.textContent) : {};
  const AP = window.ASCENDPROF = { specs: specs, charts: {}, rank: 'cluster', ready: false };
  for (const spec of Object.values(specs)) {  // charts drawing another chart's data
    if (spec.dataRef && specs[spec.dataRef]) spec.data = specs[spec.dataRef].data;
  }
  const VIRIDIS = ['#440154', '#3b528b', '#21918c', '#5ec962', '#fde725'];
  const BLUES = ['#f7fbff', '#c6dbef', '#6baed6', '#2171b5', '#08306b'];

  function esc(s) {
    return String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;',
                                                  '"': '&quot;' }[c]));
  }
  function fmt(v, unit, digits) {
    if (v === null || v === undefined || (typeof v === 'number' && isNaN(v))) return '-';
    let t = typeof v === 'number'
      ? v.toLocaleString('en-US', { minimumFractionDigits: digits || 0,
                                    maximumFractionDigits: digits || 0 })
      : String(v);
    return unit ? t + ' ' + unit : t;
  }
  function tip(spec, i) {
    return spec.tips.filter(([l, c]) => spec.data[c] !== undefined && spec.data[c][i] !== '')
      .map(([l, c, u, d]) => (l ? esc(l) + ': ' : '') + '<b>' + esc(fmt(spec.data[c][i], u, d))
           + '</b>').join('<br>');
  }
  function rows(spec) {
    const n = spec.data[spec.x] ? spec.data[spec.x].length
      : Object.values(spec.data)[0].length;
    const all = [...Array(n).keys()];
    if (!spec.filter) return all;
    return all.filter((i) => String(spec.data[spec.filter][i]) === AP.rank);
  }
  function catAxis(cats, name, horizontal) {
    // rotate when the labels would not fit side by side (many, or long ones)
    const chars = cats.reduce((n, c) => n + String(c).length + 2, 0);
    const many = cats.length > 24 || chars > 110;
    return { type: 'category', data: cats, name: horizontal ? '' : name,
             nameLocation: 'middle', nameGap: many ? 90 : 28, inverse: !!horizontal,
             axisLabel: horizontal ? { width: 260, overflow: 'truncate' }
                                   : { rotate: many ? 60 : 0, interval: 0,
                                       hideOverlap: true },
             axisTick: { alignWithLabel: true } };
  }
  function valAxis(name, max) {
    return { type: 'value', name: name, nameLocation: 'middle', nameGap: 52, min: 0,
             max: max === null || max === undefined ? null : max,
             axisLabel: { formatter: (v) => v.toLocaleString('en-US') } };
  }
  function heatOption(spec) {
    const h = spec.heat;
    const d = spec.data;
    const xi = new Map(h.xcats.map((c, i) => [String(c), i]));
    const yi = new Map(h.ycats.map((c, i) => [String(c), i]));
    const vals = d[h.v].filter((v) => typeof v === 'number');
    const hi = h.max !== undefined && h.max !== null ? h.max
      : (vals.length ? Math.max(...vals) : 1);
    const lo = h.min !== undefined && h.min !== null ? h.min
      : (vals.length ? Math.min(...vals) : 0);
    const data = [];
    d[h.v].forEach((v, i) => {
      const x = xi.get(String(d[h.x][i]));
      const y = yi.get(String(d[h.y][i]));
      if (x === undefined || y === undefined) return;  // a row of another chart (cluster)
      const item = { value: [x, y, v], row: i };
      if (h.flag && d[h.flag][i]) item.itemStyle = { borderColor: '#d62728', borderWidth: 3 };
      data.push(item);
    });
    return {
      grid: { left: 12, right: 90, top: spec.title ? 40 : 16, bottom: 30, containLabel: true },
      xAxis: catAxis(h.xcats.map(String), spec.xLabel, false),
      yAxis: Object.assign(catAxis(h.ycats.map(String), '', false),
                           { inverse: true, axisLabel: { width: 200, overflow: 'truncate' } }),
      visualMap: { min: lo, max: hi > lo ? hi : lo + 1, calculable: false, orient: 'vertical',
                   right: 4, top: 'middle', itemHeight: Math.max(60, spec.height - 140),
                   text: [h.unit || '', ''], precision: h.precision === undefined ? 2
                     : h.precision,
                   inRange: { color: h.palette === 'blues' ? BLUES : VIRIDIS } },
      series: [{ type: 'heatmap', data: data, progressive: 0,
                 itemStyle: { borderColor: '#fff', borderWidth: 1 },
                 emphasis: { itemStyle: { borderColor: '#000', borderWidth: 1 } } }],
    };
  }
  function cartesianOption(spec) {
    const idx = rows(spec);
    const d = spec.data;
    const cats = spec.xvalue ? null : idx.map((i) => String(d[spec.x][i]));
    const series = [];
    const legend = [];
    for (const s of spec.series) {
      const name = s.label || s.y;
      if (s.label) legend.push(name);
      const color = s.color || undefined;
      const item = (i, v) => {
        const it = { value: spec.xvalue ? [d[spec.x][i], v] : v, row: i };
        if (s.color_col) it.itemStyle = { color: d[s.color_col][i] };
        return it;
      };
      if (s.type === 'bar') {
        if (s.base) {  // a floating bar: an invisible bar up to base, then base..y
          series.push({ type: 'bar', stack: s.stack || name, silent: true, name: '_' + name,
                        itemStyle: { color: 'transparent' }, barGap: '-100%',
                        barWidth: s.width ? (s.width * 100) + '%' : undefined,
                        data: idx.map((i) => d[s.base][i]), tooltip: { show: false } });
        }
        series.push({ type: 'bar', name: name, stack: s.stack || (s.base ? name : undefined),
                      color: color, barGap: s.gap || '-100%',
                      barWidth: s.width ? (s.width * 100) + '%' : undefined, barMaxWidth: 70,
                      itemStyle: { borderColor: '#fff', borderWidth: idx.length > 48 ? 0 : 0.5 },
                      data: idx.map((i) => item(i, s.base ? d[s.y][i] - d[s.base][i]
                                                            : d[s.y][i])),
                      label: s.label_col ? { show: true, position: 'top', fontSize: 11,
                                             formatter: (p) => d[s.label_col][p.data.row] }
                                         : undefined });
      } else if (s.type === 'scatter') {
        const dash = s.symbol === 'dash';
        series.push({ type: 'scatter', name: name, color: color, z: 5,
                      symbol: dash ? 'rect' : (s.symbol || 'circle'),
                      symbolRotate: s.symbol === 'triangle' ? 180 : 0,
                      symbolSize: dash ? (spec.horizontal ? [3, s.size || 30]
                                                          : [s.size || 30, 3])
                        : (s.size || 9),
                      itemStyle: { opacity: s.opacity || 1 },
                      data: idx.map((i) => (d[s.y][i] === null ? null : item(i, d[s.y][i]))) });
      } else if (s.type === 'range') {  // bars from base to y on the category row (gantt)
        const catIndex = new Map();
        (spec.cats || cats).forEach((c, k) => catIndex.set(c, k));
        series.push({ type: 'custom', name: name, color: color,
          renderItem: function (params, api) {
            const i = params.dataIndex;
            const row = idx[i];
            const k = catIndex.get(String(d[spec.x][row]));
            const a = api.coord([d[s.base][row], k]);
            const b = api.coord([d[s.y][row], k]);
            const h = api.size([0, 1])[1] * 0.55;
            const c = s.color_col ? d[s.color_col][row] : color;
            const out = { type: 'group', children: [{ type: 'rect',
              shape: { x: a[0], y: a[1] - h / 2, width: Math.max(1, b[0] - a[0]), height: h },
              style: { fill: c, stroke: '#333', lineWidth: 0.5 } }] };
            if (s.label_col && d[s.label_col][row]) {
              out.children.push({ type: 'text', style: { text: d[s.label_col][row],
                x: (a[0] + b[0]) / 2, y: a[1] - h / 2 - 2, align: 'center',
                verticalAlign: 'bottom', fontSize: 11, fill: '#333' } });
            }
            return out;
          },
          encode: { x: [1, 2], y: 0 },
          data: idx.map((i) => ({ value: [d[spec.x][i], d[s.base][i], d[s.y][i]], row: i })) });
      }
    }
    const catAx = catAxis(spec.cats || cats || [], spec.horizontal ? spec.yLabel : spec.xLabel,
                          spec.horizontal);
    let xAxis = spec.horizontal ? valAxis(spec.xLabel, spec.yMax) : catAx;
    let yAxis = spec.horizontal ? catAx : valAxis(spec.yLabel, spec.yMax);
    if (spec.horizontal && spec.series.some((s) => s.type === 'bar' && !s.base)) {
      xAxis.min = null;  // diverging bars (B - A) go below 0
    }
    if (spec.xvalue) {
      const xc = spec.xcats || [];
      xAxis = { type: 'value', name: spec.xLabel, nameLocation: 'middle', nameGap: 28,
                min: -0.5, max: xc.length - 0.5, interval: 0.5, splitLine: { show: false },
                axisLabel: { formatter: (v) => (Number.isInteger(v) ? (xc[v] || '') : '') } };
      yAxis.axisLine = { onZero: false };
    }
    const opt = {
      grid: { left: spec.horizontal ? 12 : 70, right: 24, containLabel: !!spec.horizontal,
              top: (spec.title ? 40 : 16) + (legend.length ? 24 : 0),
              bottom: !spec.horizontal && catAx.axisLabel && catAx.axisLabel.rotate
                ? 120 : 56 },
      legend: legend.length ? { data: legend, top: spec.title ? 22 : 0, type: 'scroll' }
                            : undefined,
      xAxis: xAxis, yAxis: yAxis, series: series,
      dataZoom: !spec.horizontal && cats && cats.length > 64
        ? [{ type: 'inside' }, { type: 'slider', height: 16, bottom: 4 }] : undefined,
    };
    if (spec.hline !== null && spec.hline !== undefined && series.length) {
      series[0].markLine = { silent: true, symbol: 'none', data: [{ yAxis: spec.hline }],
                             lineStyle: { type: 'dashed', color: '#444' },
                             label: { formatter: String(spec.hline) } };
    }
    return opt;
  }
  function option(spec) {
    const opt = spec.heat ? heatOption(spec) : cartesianOption(spec);
    opt.animation = false;
    opt.title = spec.title ? { text: spec.title, left: 0, top: 0,
                               textStyle: { fontSize: 13, fontWeight: 600 } } : undefined;
    opt.tooltip = { trigger: 'item', confine: true,
                    formatter: (p) => (p.data && p.data.row !== undefined
                      ? tip(spec, p.data.row) : '') };
    opt.toolbox = { right: 8, top: 0, feature: { saveAsImage: { title: 'save' } } };
    return opt;
  }
  function draw(div) {
    const name = div.dataset.spec;
    const spec = specs[name];
    if (!spec || AP.charts[name]) return;
    div.style.height = spec.height + 'px';
    const chart = echarts.init(div, null, { renderer: 'canvas' });
    chart.setOption(option(spec));
    AP.charts[name] = chart;
    if (spec.select) {
      chart.on('click', (p) => {
        if (p.data && p.data.row !== undefined && spec.data.rank) {
          AP.selectRank(String(spec.data.rank[p.data.row]));
        }
      });
    }
  }
  AP.selectRank = function (rank) {
    const sel = document.querySelector('select.rank-pick');
    if (!sel || ![...sel.options].some((o) => o.value === rank)) return;
    sel.value = rank;
    sel.dispatchEvent(new Event('change'));
  };
  function onRank() {
    for (const [name, spec] of Object.entries(specs)) {
      if (spec.filter && AP.charts[name]) AP.charts[name].setOption(option(spec), true);
    }
    const has = (text, r) => String(text).split(',').some((p) => {
      const [a, b] = p.split('-');
      return b === undefined ? a.trim() === r
        : Number(r) >= Number(a) && Number(r) <= Number(b);
    });
    document.querySelectorAll('table.by-rank tbody tr').forEach((tr) => {
      tr.hidden = !(AP.rank === 'cluster' || has(tr.dataset.ranks || '', AP.rank));
    });
  }
  function drawVisible(root) {
    root.querySelectorAll('div.plot').forEach((div) => {
      if (div.offsetParent !== null) draw(div);
    });
  }
  document.querySelectorAll('div.tabs').forEach((tabs) => {
    const buttons = tabs.querySelectorAll(':scope > .tabbar > button');
    const panels = tabs.querySelectorAll(':scope > .panel');
    buttons.forEach((b, k) => b.addEventListener('click', () => {
      buttons.forEach((x, j) => x.classList.toggle('on', j === k));
      panels.forEach((p, j) => { p.hidden = j !== k; });
      drawVisible(panels[k]);
      panels[k].querySelectorAll('div.plot').forEach((div) => {
        const c = AP.charts[div.dataset.spec];
        if (c) c.resize();
      });
    }));
  });
  document.querySelectorAll('select.rank-pick').forEach((sel) => {
    sel.addEventListener('change', () => { AP.rank = sel.value; onRank(); });
  });
  drawVisible(document);
  window.addEventListener('resize', () => Object.values(AP.charts).forEach((c) => c.resize()));
  AP.ready = true;
}());
