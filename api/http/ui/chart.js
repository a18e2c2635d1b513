// A small SVG line chart of ours (no third-party code): time on x, values on y, one
// path per series, a legend with each series' latest value. Redrawn whole on every
// refresh; a chart holds no data of its own.

const SVG = 'http://www.w3.org/2000/svg';
const COLORS = ['#1f77b4', '#2ca02c', '#d62728', '#9467bd', '#ff7f0e', '#17becf'];
const MARGIN = {left: 56, right: 12, top: 10, bottom: 22};
const Y_TICKS = 4;

function svg(tag, attrs = {}, text) {
  const el = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) el.setAttribute(key, String(value));
  if (text !== undefined) el.textContent = text;
  return el;
}

function clock(ms) {
  return new Date(ms).toLocaleTimeString('en-GB', {hour12: false});
}

/** A y-axis top that is a round number above the largest value (1 when all are 0). */
function niceTop(max) {
  if (!(max > 0)) return 1;
  const step = 10 ** Math.floor(Math.log10(max));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * step >= max) return m * step;
  return 10 * step;
}

export class LineChart {
  /** title: shown above; format: how a value reads (axis and legend). */
  constructor(title, format, {width = 560, height = 190} = {}) {
    this.format = format;
    this.width = width;
    this.height = height;
    this.svg = svg('svg', {viewBox: `0 0 ${width} ${height}`, class: 'chart-svg',
      role: 'img', 'aria-label': title});
    this.legend = document.createElement('ul');
    this.legend.className = 'legend';
    this.element = document.createElement('figure');
    this.element.className = 'chart';
    this.element.dataset.chart = title;
    const caption = document.createElement('figcaption');
    caption.textContent = title;
    this.element.append(caption, this.svg, this.legend);
  }

  /** series: [{name, points: [[timestampMs, value], ...] oldest first}]. */
  draw(series) {
    const all = series.flatMap((s) => s.points);
    this.svg.replaceChildren();
    this.legend.replaceChildren();
    const plot = {x0: MARGIN.left, x1: this.width - MARGIN.right,
      y0: this.height - MARGIN.bottom, y1: MARGIN.top};
    const t0 = Math.min(...all.map((p) => p[0]));
    const t1 = Math.max(...all.map((p) => p[0]));
    const top = niceTop(Math.max(0, ...all.map((p) => p[1])));
    const x = (t) => (t1 > t0 ? plot.x0 + ((t - t0) / (t1 - t0)) * (plot.x1 - plot.x0) : plot.x1);
    const y = (v) => plot.y0 - (v / top) * (plot.y0 - plot.y1);
    this.drawAxes(plot, top, y);
    if (all.length === 0) {
      this.svg.append(svg('text', {x: (plot.x0 + plot.x1) / 2, y: (plot.y0 + plot.y1) / 2,
        class: 'chart-empty', 'text-anchor': 'middle'}, 'collecting samples…'));
    } else {
      this.svg.append(
        svg('text', {x: plot.x0, y: this.height - 4, class: 'chart-tick'}, clock(t0)),
        svg('text', {x: plot.x1, y: this.height - 4, class: 'chart-tick',
          'text-anchor': 'end'}, clock(t1)));
    }
    series.forEach((s, i) => this.drawSeries(s, COLORS[i % COLORS.length], x, y));
  }

  drawAxes(plot, top, y) {
    for (let i = 0; i <= Y_TICKS; i += 1) {
      const value = (top * i) / Y_TICKS;
      this.svg.append(
        svg('line', {x1: plot.x0, x2: plot.x1, y1: y(value), y2: y(value), class: 'chart-grid'}),
        svg('text', {x: plot.x0 - 6, y: y(value) + 4, class: 'chart-tick',
          'text-anchor': 'end'}, this.format(value)));
    }
  }

  drawSeries({name, points}, color, x, y) {
    if (points.length > 0) {
      const d = points.map(([t, v], i) => `${i ? 'L' : 'M'}${x(t).toFixed(1)},${y(v).toFixed(1)}`);
      this.svg.append(svg('path', {d: d.join(' '), stroke: color, class: 'chart-line',
        'data-series': name, 'data-points': points.length}));
    }
    const latest = points.length ? this.format(points[points.length - 1][1]) : '–';
    const item = document.createElement('li');
    const swatch = document.createElement('span');
    swatch.className = 'swatch';
    swatch.style.background = color;
    item.append(swatch, `${name}: ${latest}`);
    this.legend.append(item);
  }
}
