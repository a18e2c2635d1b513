// One list of the Admin page: a table refreshed from a GET path, optionally a delete
// button per row and a form that adds or changes a row.

import {h, fill, confirmButton, formValues} from '../dom.js';
import {plainTable} from '../table.js';
import {perform} from './actions.js';

/**
 * spec: {title, path, columns, rowKey, remove(api, row) -> promise (optional),
 * fields: [node, ...] and submit(api, values) -> promise (optional), done: text}.
 */
export function listSection(api, spec) {
  const box = h('div');
  const note = h('p', {class: 'note'});
  const columns = spec.remove ? [...spec.columns, {key: 'delete', label: '', value: () => '',
    render: (row) => confirmButton('Delete', async () => {
      await perform(note, () => spec.remove(api, row), 'Deleted.');
      await refresh().catch(() => {});  // the next periodic refresh reports failures
    }, {'data-action': 'delete'})}] : spec.columns;
  let form = null;
  if (spec.submit) {
    form = h('form', {class: 'inline-form', 'data-form': spec.name}, spec.fields,
      h('button', {type: 'submit'}, spec.button ?? 'Save'));
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      await perform(note, () => spec.submit(api, formValues(form)), spec.done ?? 'Saved.');
      await refresh().catch(() => {});
    });
  }
  const element = h('section', {class: 'panel', 'data-section': spec.name},
    h('h2', {}, spec.title), box, form, note);

  let shown = null;

  async function refresh() {
    const rows = await api.get(spec.path);
    const text = JSON.stringify(rows);
    if (text === shown) return;  // unchanged: keep the rows, and a Delete armed in them
    shown = text;
    fill(box, plainTable(columns, rows, spec.rowKey, spec.name));
  }

  return {element, refresh};
}
