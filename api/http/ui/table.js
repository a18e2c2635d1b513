// A sortable, filterable, paged table that renders only the page shown, so a list of
// thousands of queues stays fast. Its sort, filter and page survive each refresh.

import {h, fill} from './dom.js';

const PAGE_SIZES = [20, 50, 100, 500];

/**
 * columns: [{key, label, value(row) -> sortable value, render(row) -> node or text,
 * numeric}]; rowKey(row) names a row (data-key, for tests and links).
 */
export class DataTable {
  constructor({columns, rowKey, sortKey, pageSize = 20, empty = 'Nothing to show.', name}) {
    this.columns = columns;
    this.rowKey = rowKey;
    this.sort = {key: sortKey ?? columns[0].key, descending: false};
    this.pageSize = pageSize;
    this.page = 0;
    this.filter = '';
    this.emptyText = empty;
    this.rows = [];
    this.filterInput = h('input', {type: 'search', placeholder: 'Filter', class: 'filter',
      'aria-label': 'Filter', oninput: () => {
        this.filter = this.filterInput.value;
        this.page = 0;
        this.render();
      }});
    this.pager = h('span', {class: 'pager'});
    this.table = h('table', {class: 'data', 'data-table': name});
    this.element = h('div', {class: 'table-wrap'},
      h('div', {class: 'table-tools'}, this.filterInput, this.pager), this.table);
  }

  setRows(rows) {
    this.rows = rows;
    this.render();
  }

  visibleRows() {
    const needle = this.filter.trim().toLowerCase();
    const matching = needle === '' ? this.rows : this.rows.filter((row) => this.columns.some(
      (column) => String(column.value(row) ?? '').toLowerCase().includes(needle)));
    const column = this.columns.find((c) => c.key === this.sort.key) ?? this.columns[0];
    const sign = this.sort.descending ? -1 : 1;
    return [...matching].sort((a, b) => sign * compare(column.value(a), column.value(b)));
  }

  render() {
    const rows = this.visibleRows();
    const pages = Math.max(1, Math.ceil(rows.length / this.pageSize));
    this.page = Math.min(this.page, pages - 1);
    const first = this.page * this.pageSize;
    const shown = rows.slice(first, first + this.pageSize);
    fill(this.table, h('thead', {}, h('tr', {}, this.columns.map((c) => this.header(c)))),
      h('tbody', {}, shown.length ? shown.map((row) => this.row(row))
        : h('tr', {}, h('td', {colspan: this.columns.length, class: 'muted'}, this.emptyText))));
    this.renderPager(rows.length, first, shown.length, pages);
  }

  header(column) {
    const sorted = this.sort.key === column.key;
    const arrow = sorted ? (this.sort.descending ? ' ▼' : ' ▲') : '';
    return h('th', {class: column.numeric ? 'num sortable' : 'sortable',
      'aria-sort': sorted ? (this.sort.descending ? 'descending' : 'ascending') : 'none',
      onclick: () => {
        this.sort = {key: column.key, descending: sorted ? !this.sort.descending : false};
        this.render();
      }}, column.label + arrow);
  }

  row(row) {
    return h('tr', {'data-key': this.rowKey(row)}, this.columns.map((column) => h('td',
      {class: column.numeric ? 'num' : undefined, 'data-col': column.key},
      column.render ? column.render(row) : (column.value(row) ?? ''))));
  }

  renderPager(total, first, count, pages) {
    const sizes = h('select', {'aria-label': 'Rows per page', onchange: (event) => {
      this.pageSize = Number(event.target.value); this.page = 0; this.render();
    }}, PAGE_SIZES.map((n) => h('option', {value: n, selected: n === this.pageSize},
      `${n} / page`)));
    fill(this.pager,
      total ? `${first + 1}–${first + count} of ${total}` : '0 of 0', ' ',
      h('button', {type: 'button', disabled: this.page === 0,
        onclick: () => { this.page -= 1; this.render(); }}, '‹ Prev'),
      h('button', {type: 'button', disabled: this.page >= pages - 1,
        onclick: () => { this.page += 1; this.render(); }}, 'Next ›'),
      sizes);
  }
}

function compare(a, b) {
  const blankA = a === undefined || a === null || a === '';
  const blankB = b === undefined || b === null || b === '';
  if (blankA || blankB) return blankA === blankB ? 0 : (blankA ? 1 : -1);
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  return String(a).localeCompare(String(b), 'en', {numeric: true});
}

/** A small table without tools: columns as for DataTable, every row shown. */
export function plainTable(columns, rows, rowKey, name, empty = 'None.') {
  return h('table', {class: 'data', 'data-table': name},
    h('thead', {}, h('tr', {}, columns.map((c) => h('th', {class: c.numeric ? 'num' : undefined},
      c.label)))),
    h('tbody', {}, rows.length ? rows.map((row) => h('tr', {'data-key': rowKey(row)},
      columns.map((c) => h('td', {class: c.numeric ? 'num' : undefined, 'data-col': c.key},
        c.render ? c.render(row) : (c.value(row) ?? ''))))) : h('tr', {}, h('td',
      {colspan: columns.length, class: 'muted'}, empty))));
}
