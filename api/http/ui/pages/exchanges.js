// Exchanges: every exchange the user may see, and a form to declare one.

import {h, field, formValues, select} from '../dom.js';
import {DataTable} from '../table.js';
import {apiPath} from '../api.js';
import {link} from '../router.js';
import * as fmt from '../format.js';
import {perform, parseJsonObject} from './actions.js';
import {vhostSelect} from './vhosts.js';

const shown = (name) => name || '(AMQP default)';
const pathName = (name) => name || 'amq.default';

const COLUMNS = [
  {key: 'vhost', label: 'Vhost', value: (x) => x.vhost},
  {key: 'name', label: 'Name', value: (x) => x.name,
    render: (x) => h('a', {href: link('exchanges', x.vhost, pathName(x.name))}, shown(x.name))},
  {key: 'type', label: 'Type', value: (x) => x.type},
  {key: 'durable', label: 'Durable', value: (x) => (x.durable ? 'yes' : 'no')},
  {key: 'auto_delete', label: 'Auto-delete', value: (x) => (x.auto_delete ? 'yes' : 'no')},
  {key: 'internal', label: 'Internal', value: (x) => (x.internal ? 'yes' : 'no')},
  {key: 'arguments', label: 'Arguments', value: (x) => fmt.json(x.arguments)},
  {key: 'policy', label: 'Policy', value: (x) => x.policy ?? ''},
  {key: 'in', label: 'Publish in', numeric: true,
    value: (x) => fmt.statRate(x.message_stats, 'publish_in'),
    render: (x) => fmt.rate(fmt.statRate(x.message_stats, 'publish_in'))},
  {key: 'out', label: 'Publish out', numeric: true,
    value: (x) => fmt.statRate(x.message_stats, 'publish_out'),
    render: (x) => fmt.rate(fmt.statRate(x.message_stats, 'publish_out'))},
];

const TYPES = ['direct', 'fanout', 'topic', 'headers', 'x-consistent-hash'];

async function declareForm(api) {
  const note = h('p', {class: 'note'});
  const form = h('form', {class: 'inline-form', 'data-form': 'declare-exchange'},
    field('Vhost', await vhostSelect(api)),
    field('Name', h('input', {name: 'name', required: true, maxlength: 255})),
    field('Type', select('type', TYPES.map((t) => [t, t]), 'direct')),
    field('Durable', h('input', {name: 'durable', type: 'checkbox', checked: true})),
    field('Arguments (JSON)', h('input', {name: 'arguments', class: 'wide'})),
    h('button', {type: 'submit'}, 'Add exchange'), note);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const values = formValues(form);
    await perform(note, async () => api.put(apiPath('exchanges', values.vhost, values.name), {
      type: values.type, durable: values.durable,
      arguments: parseJsonObject(values.arguments, 'arguments')}),
    `Exchange '${values.name}' declared.`);
  });
  return form;
}

export function create({api, session}) {
  const table = new DataTable({columns: COLUMNS, rowKey: (x) => `${x.vhost}/${x.name}`,
    sortKey: 'name', name: 'exchanges'});
  const adder = h('div');
  const element = h('div', {class: 'page', 'data-page': 'exchanges'},
    h('h1', {}, 'Exchanges'), table.element, adder);
  if (!session.readOnly) {
    declareForm(api).then((form) => adder.append(h('section', {class: 'panel'},
      h('h2', {}, 'Add an exchange'), form)));
  }
  return {element, refresh: async () => table.setRows(await api.get('/api/exchanges'))};
}
